// ATTStack: the Attribute Protocol (Core Specification 5.4, Vol 3, Part F) with no I/O in the codec,
// and the bearer that moves whole ATT PDUs over a socket.
