"""Runs, in the VM, every example of `mirror`'s --help, README and docs/cli.md that needs an adapter (an LE address, or
doctor/adapters/discover), against mirror-sim on hci1 (00:AA:01:01:00:01) from hci0. ExamplesTests runs the
rest (unix: and --loopback) against mirror-sim over AF_UNIX. Prints one line per example; exits 1 if any failed.

usage: examples.py BIN REPO OUTDIR
An example is run as printed, with only what cannot exist in the VM replaced (each replacement is printed):
another LE address -> the simulator's, hci1 (the simulator's controller) -> hci0, the LAN upload host ->
127.0.0.1 with any free port, my-mirror.json -> a copy of profiles/mirror-sim.json, commands.txt -> a
one-line script. A streaming example (listen without --count or --duration) is interrupted with SIGINT once
it has subscribed, and must end 0 (the README's signals table).
"""
import os, re, shlex, signal, subprocess, sys, time

BIN, REPO, OUT = sys.argv[1:4]
SIM = "00:AA:01:01:00:01"
ADDRESS = re.compile(r"\b[0-9A-F]{2}(?::[0-9A-F]{2}){5}\b")
os.makedirs(OUT, exist_ok=True)


def help_examples():
    top = subprocess.run([f"{BIN}/mirror", "--help"], capture_output=True, text=True).stdout
    commands = re.findall(r"^  ([a-z]+)  ", top.split("Commands:")[1].split("\n\n")[0], re.M)
    found = []
    for command in commands:
        text = subprocess.run([f"{BIN}/mirror", command, "--help"], capture_output=True, text=True).stdout
        if "Examples:" not in text:
            continue
        for line in text.split("Examples:")[1].split("\n"):
            line = line.strip()
            if line.startswith("mirror ") or line.startswith("printf "):
                found.append(line)
    return found


# The README and the pages it sends a user to for a command's detail (ExamplesTests reads the same list).
DOCUMENTS = ["README.md", "docs/cli.md", "docs/security.md", "docs/install.md"]


def readme_examples():
    readme = "\n".join(open(os.path.join(REPO, d)).read() for d in DOCUMENTS)
    found = re.findall(r"`(mirror [^`]*)`", readme)
    found += [l[2:] for l in readme.split("\n") if l.startswith("$ mirror ")]
    # A synopsis ("mirror discover [--duration S]") is not a command line.
    return [f for f in found if "[" not in f]


def needs_adapter(example):
    words = example.split()
    if "unix:" in example or "--loopback" in example:
        return False
    return bool(ADDRESS.search(example)) or (len(words) > 1 and words[1] in ("doctor", "adapters", "discover"))


def adapt(example):
    """The example as run here, and what was replaced."""
    changes = []
    command = example
    for address in set(ADDRESS.findall(command)) - {SIM}:
        command = command.replace(address, SIM)
        changes.append(f"{address} -> {SIM}")
    if "--type random" in command:
        command = command.replace(" --type random", "")
        changes.append("--type random dropped (the simulator's address is public)")
    if "--adapter hci1" in command:
        command = command.replace("--adapter hci1", "--adapter hci0")
        changes.append("hci1 -> hci0 (hci1 is the simulator's)")
    if "--upload-host" in command:
        command = re.sub(r"--upload-host \S+", "--upload-host 127.0.0.1 --upload-port 0", command)
        changes.append("upload host -> 127.0.0.1, any port")
    if "my-mirror.json" in command:
        with open(os.path.join(REPO, "profiles/mirror-sim.json")) as f, open(os.path.join(OUT, "my-mirror.json"), "w") as g:
            g.write(f.read())
        changes.append("my-mirror.json = profiles/mirror-sim.json")
    if "commands.txt" in command:
        with open(os.path.join(OUT, "commands.txt"), "w") as f:
            f.write("read 0x0003\n")
        changes.append("commands.txt = 'read 0x0003'")
    return command, changes


def run(example, index):
    command, changes = adapt(example)
    log = os.path.join(OUT, f"example-{index:02d}.log")
    words = shlex.split(command)
    streaming = words[1] == "listen" and "--count" not in words and "--duration" not in words
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", XDG_CACHE_HOME=os.path.join(OUT, "cache"),
               XDG_STATE_HOME=os.path.join(OUT, "state"))
    with open(log, "w") as out:
        # The example's own shell words ($(...), <, |) through bash; mirror resolved from BIN.
        p = subprocess.Popen(["bash", "-c", "exec " + command if not streaming else command], cwd=OUT, env=env,
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if streaming:
                expected = 0
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and p.poll() is None and "subscribed" not in open(log).read():
                    time.sleep(0.1)
                os.killpg(p.pid, signal.SIGINT)
            else:
                expected = 0
            status = p.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            status = "killed after 90 s"
    ok = status == expected
    print(f"{'ok  ' if ok else 'FAIL'} {example}" + (f"  [ran: {command}; {'; '.join(changes)}]" if changes else "")
          + ("" if ok else f"  exit {status}, expected {expected}; {log}:\n" + open(log).read()[-1500:]))
    sys.stdout.flush()
    return ok


examples = sorted(set(e for e in help_examples() + readme_examples() if needs_adapter(e)))
print(f"{len(examples)} examples need an adapter")
results = [run(e, i) for i, e in enumerate(examples)]
print(f"{results.count(True)} passed, {results.count(False)} failed")
sys.exit(0 if all(results) and len(examples) >= 10 else 1)
