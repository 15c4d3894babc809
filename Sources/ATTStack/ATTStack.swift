// ATTStack: the Attribute Protocol codec (Core Specification 5.4, Vol 3, Part F): bytes in, ATTPDU out, and back.
// No I/O, no C, no Foundation: the socket bearer and the rest of the Linux I/O live in LinuxBluetooth.
