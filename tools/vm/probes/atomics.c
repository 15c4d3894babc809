// Times N locked cmpxchg16b against N locked 8-byte cmpxchg (what Swift's task status uses vs a plain atomic).
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <pthread.h>
static __int128 v16 __attribute__((aligned(16)));
static int64_t v8;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static double cpu(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void *spin(void *a){ (void)a; for(;;){} return 0; }
int main(int argc,char**argv){
  int n=200000;
  if (argc>1) { pthread_t t; pthread_create(&t,0,spin,0); }
  double c0=cpu(),t0=now();
  for(int i=0;i<n;i++){ int64_t e=v8; __atomic_compare_exchange_n(&v8,&e,e+1,0,__ATOMIC_SEQ_CST,__ATOMIC_SEQ_CST);} 
  double c1=cpu(),t1=now();
  for(int i=0;i<n/10;i++){ uint64_t lo=(uint64_t)v16,hi=(uint64_t)(v16>>64); uint64_t nlo=lo+1,nhi=hi; __asm__ volatile("lock cmpxchg16b %0" : "+m"(v16), "+a"(lo), "+d"(hi) : "b"(nlo), "c"(nhi) : "memory","cc");} 
  double c2=cpu(),t2=now();
  printf("cmpxchg8: %.3f us each (wall %.3f); cmpxchg16b: %.3f us each (wall %.3f)\n",(c1-c0)/n*1e6,(t1-t0)/n*1e6,(c2-c1)/(n/10)*1e6,(t2-t1)/(n/10)*1e6);
  return 0;
}
