// Costs of single operations under TCG: a vDSO clock read, rdtsc, a pthread mutex pair, an eventfd write+read.
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <x86intrin.h>
static double cpu(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  int n=20000; struct timespec ts; double c0,c1; uint64_t s=0;
  c0=cpu(); for(int i=0;i<n;i++){clock_gettime(CLOCK_MONOTONIC,&ts); s+=ts.tv_nsec;} c1=cpu();
  printf("clock_gettime(MONOTONIC) %.3f us\n",(c1-c0)/n*1e6);
  c0=cpu(); for(int i=0;i<n;i++){clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&ts); s+=ts.tv_nsec;} c1=cpu();
  printf("clock_gettime(PROCESS_CPUTIME) %.3f us\n",(c1-c0)/n*1e6);
  c0=cpu(); for(int i=0;i<n;i++){s+=__rdtsc();} c1=cpu();
  printf("rdtsc %.3f us\n",(c1-c0)/n*1e6);
  pthread_mutex_t m=PTHREAD_MUTEX_INITIALIZER;
  c0=cpu(); for(int i=0;i<n;i++){pthread_mutex_lock(&m);pthread_mutex_unlock(&m);} c1=cpu();
  printf("mutex pair %.3f us\n",(c1-c0)/n*1e6);
  int fd=eventfd(0,0); uint64_t v=1;
  c0=cpu(); for(int i=0;i<n;i++){(void)!write(fd,&v,8);(void)!read(fd,&v,8);} c1=cpu();
  printf("eventfd write+read %.3f us\n",(c1-c0)/n*1e6);
  c0=cpu(); for(int i=0;i<n;i++){pthread_self(); s+=(uint64_t)pthread_self();} c1=cpu();
  printf("pthread_self %.3f us (%lu)\n",(c1-c0)/n*1e6,(unsigned long)(s&1));
  return 0;
}
