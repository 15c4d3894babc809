// Issue 38 point 4: sendmmsg on an LE ATT socket (L2CAP CID 4). The kernel's sendmmsg calls the protocol's sendmsg
// once per message, so each should go out as one SDU, one Write Command (Vol 3 Part F §3.4.5.3). Sends COUNT
// 20-byte Write Commands to handle 0x0012 per BATCH (1: one send() each), non-blocking, a full socket waited out
// with poll(POLLOUT), then a Read Request as the barrier; prints calls, EAGAINs, partial batches and CPU per PDU.
// Usage: sendmmsg-cid4 PEER COUNT BATCH...   (cc -O2 sendmmsg-cid4.c -lbluetooth)
#define _GNU_SOURCE
#include <bluetooth/bluetooth.h>
#include <bluetooth/l2cap.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static double cpu_us(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: sendmmsg-cid4 PEER COUNT BATCH...\n"); return 2; }
    struct sockaddr_l2 a = { .l2_family = AF_BLUETOOTH, .l2_cid = htobs(4), .l2_bdaddr_type = BDADDR_LE_PUBLIC };
    int fd = socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0) { perror("socket/bind"); return 1; }
    str2ba(argv[1], &a.l2_bdaddr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); return 1; }
    int count = atoi(argv[2]);
    unsigned char pdu[23] = { 0x52, 0x12, 0x00 };  // Write Command, handle 0x0012, 20 bytes
    for (int i = 3; i < 23; i++) pdu[i] = (unsigned char)i;
    struct iovec iov = { pdu, sizeof pdu };
    struct mmsghdr msgs[256];
    for (int i = 0; i < 256; i++) msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1 } };
    for (int arg = 3; arg < argc; arg++) {
        int batch = atoi(argv[arg]), sent = 0;
        long calls = 0, eagain = 0, partial = 0;
        if (batch < 1 || batch > 256) { fprintf(stderr, "BATCH is 1 to 256\n"); return 2; }
        double t0 = cpu_us();
        while (sent < count) {
            int k = count - sent < batch ? count - sent : batch, r;
            calls++;
            r = batch == 1 ? (send(fd, pdu, sizeof pdu, MSG_DONTWAIT) < 0 ? -1 : 1) : sendmmsg(fd, msgs, k, MSG_DONTWAIT);
            if (r < 0 && errno == EAGAIN) {
                struct pollfd p = { fd, POLLOUT, 0 };
                eagain++;
                poll(&p, 1, 5000);
                continue;
            }
            if (r < 0) { perror(batch == 1 ? "send" : "sendmmsg"); return 1; }
            if (r < k) partial++;
            sent += r;
        }
        unsigned char rq[3] = { 0x0A, 0x12, 0x00 }, buf[600];  // Read Request: answered after every command
        if (send(fd, rq, sizeof rq, 0) < 0) { perror("send"); return 1; }
        for (;;) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) { perror("recv"); return 1; }
            if (buf[0] == 0x0B || buf[0] == 0x01) break;
        }
        double t1 = cpu_us();
        printf("batch %d: %d Write Commands, %ld send calls (%.3f per PDU), %ld EAGAIN, %ld partial batches, CPU %.1f us per PDU\n",
               batch, count, calls, (double)calls / count, eagain, partial, (t1 - t0) / count);
        fflush(stdout);
    }
    close(fd);
    return 0;
}
