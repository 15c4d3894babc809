// Per iteration: one syscall (getppid), then a read of one byte from each of K distinct pages. Under TCG, if the
// softmmu TLB is flushed by the syscall's CR3 switches, the cost per iteration grows with K.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
static double cpu(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  int ks[]={0,16,64,256};
  volatile unsigned char *mem = malloc(4096*300);
  for (int i=0;i<4096*300;i++) mem[i]=i;
  for (int a=0;a<4;a++){
    int k=ks[a], n=20000; unsigned sum=0;
    double c0=cpu();
    for(int i=0;i<n;i++){ syscall(SYS_getppid); for(int p=0;p<k;p++) sum+=mem[p*4096]; }
    double c1=cpu();
    double c2=cpu();
    for(int i=0;i<n;i++){ for(int p=0;p<k;p++) sum+=mem[p*4096]; }
    double c3=cpu();
    printf("K=%d: syscall+pages %.2f us, pages alone %.2f us (sum %u)\n",k,(c1-c0)/n*1e6,(c3-c2)/n*1e6,sum&1);
  }
  return 0;
}
