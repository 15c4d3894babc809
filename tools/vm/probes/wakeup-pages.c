// Per iteration: a pipe round trip with a child process (the parent sleeps in read and wakes: a context switch,
// and a CR3 load when the child ran on the same CPU), then a read of one byte from each of K distinct pages.
// Under TCG a CR3 load flushes the vCPU's softmmu TLB, so the cost per iteration grows with K.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
static double cpu(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc, char **argv){
  int same = argc > 1;
  if (same) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(0,&s); sched_setaffinity(0,sizeof s,&s); }
  int a[2], b[2]; if (pipe(a) || pipe(b)) return 1;
  pid_t child = fork();
  if (child == 0) { char c; while (read(a[0],&c,1)==1) { if (write(b[1],&c,1)!=1) break; } _exit(0); }
  int ks[]={0,64,256};
  volatile unsigned char *mem = malloc(4096*300);
  for (int i=0;i<4096*300;i++) mem[i]=i;
  for (int r=0;r<3;r++){
    int k=ks[r], n=3000; unsigned sum=0; char c='x';
    double c0=cpu();
    for(int i=0;i<n;i++){ if(write(a[1],&c,1)!=1||read(b[0],&c,1)!=1) return 2; for(int p=0;p<k;p++) sum+=mem[p*4096]; }
    double c1=cpu();
    printf("%s K=%d: %.2f us per round trip (parent's CPU) (%u)\n", same?"one CPU":"any CPU", k,(c1-c0)/n*1e6,sum&1);
  }
  kill(child,SIGTERM);
  return 0;
}
