#!/usr/bin/env python3
# Runs a command in a real pseudo-terminal (80x24) and plays a script against it: each step sends keys or
# expects text (with a limit). Prints one JSON object: ok, the failed step with what it waited for, the exit
# status, and the whole transcript (the raw bytes the terminal got, escape codes included).
# usage: pty-drive.py STEPS_JSON COMMAND [ARG...]
#   steps: [["send", "text"], ["expect", "text", seconds], ["pause", seconds], ["exit", seconds]]
import fcntl, json, os, pty, select, struct, sys, termios, time

steps = json.loads(sys.argv[1])
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
out = b""
cursor = 0  # where the next expect starts looking
status = None

def pump(limit):
    global out
    r, _, _ = select.select([fd], [], [], max(0.0, limit))
    if not r:
        return True
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        return False
    if not chunk:
        return False
    out += chunk
    return True

def finish(ok, failed=None, waited=None):
    global status
    if status is None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            p, s = os.waitpid(pid, os.WNOHANG)
            if p:
                status = os.waitstatus_to_exitcode(s)
                break
            pump(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    print(json.dumps({"ok": ok, "failed": failed, "waited": waited, "status": status,
                      "transcript": out.decode("utf-8", "replace")}))
    sys.exit(0)

for i, step in enumerate(steps):
    kind = step[0]
    if kind == "send":
        os.write(fd, step[1].encode())
    elif kind == "pause":
        end = time.monotonic() + step[1]
        while time.monotonic() < end and pump(end - time.monotonic()):
            pass
    elif kind == "expect":
        want = step[1].encode()
        end = time.monotonic() + step[2]
        while out.find(want, cursor) < 0:
            if time.monotonic() >= end or not pump(end - time.monotonic()):
                break
        at = out.find(want, cursor)
        if at < 0:
            finish(False, i, step[1])
        cursor = at + len(want)
    elif kind == "exit":
        end = time.monotonic() + step[1]
        while time.monotonic() < end:
            p, s = os.waitpid(pid, os.WNOHANG)
            if p:
                status = os.waitstatus_to_exitcode(s)
                while pump(0.05):
                    pass
                break
            pump(0.05)
        if status is None:
            finish(False, i, "the process to exit")
finish(True)
