#!/usr/bin/env python3
"""Groups a callgrind run's instructions (Ir) by the part of the write path they belong to.

Reads callgrind's own output files (one per thread: valgrind --separate-threads=yes writes PREFIX-01, PREFIX-02, ...),
leaves out every thread that ran the in-process peer (BareATT's PlainPeer.serve, acceptLoop), and maps each function to
a group by its object (the shared library it is in) and its Swift module (the mangled name's first identifier).

Two figures per group, each additive (the groups sum to the client's total):
- self: the instructions of the group's own functions.
- charged: self, plus the helpers it called: malloc/ARC, the rest of the Swift runtime (metadata, conformances,
  exclusivity), the standard library's unspecialized or unmerged code and libc (syscall stubs, pthread mutexes,
  memcpy). A helper's instructions go to its callers in proportion to callgrind's inclusive call costs, through helper
  callers up to the first caller that is not one (so malloc under swift_allocObject under the engine is the engine's;
  the pthread mutex under the runtime's status record lock is the runtime's). What stays on a helper's row had no
  caller in the thread's file. Callgrind's own inclusive cost is not used per group: the runtime runs the engine's
  jobs and the engine calls into the runtime, so group inclusives overlap and are not a breakdown.

Usage:
  callgrind_groups.py PREFIX                      -> JSON {"threads": ..., "total": N, "self": {...}, "inclusive": {...}}
  callgrind_groups.py --diff SMALL BIG COUNT      -> JSON of (BIG - SMALL) / COUNT per group (two JSON files above)
"""
import glob
import json
import re
import sys

# Groups, in the order the table prints them.
GROUPS = [
    "concurrency runtime",
    "engine",
    "loop",
    "bearer",
    "transport decorator",
    "codec",
    "malloc/ARC",
    "Swift runtime, other",
    "stdlib",
    "libc (syscalls, locks, memcpy)",
    "bench bookkeeping",
    "other",
]

MALLOC_ARC = re.compile(
    r"^(malloc|free|calloc|realloc|cfree|_int_malloc|_int_free|_int_realloc|malloc_consolidate|tcache_\w+|"
    r"__libc_malloc|__libc_free|__libc_calloc|__libc_realloc|__posix_memalign|posix_memalign|aligned_alloc|"
    r"_mid_memalign|_int_memalign|unlink_chunk\S*|sysmalloc|alloc_perturb|free_perturb|"
    r"swift_(retain|release|nonatomic_retain|nonatomic_release|bridgeObjectRetain|bridgeObjectRelease|"
    r"unknownObjectRetain|unknownObjectRelease|allocObject|deallocObject|deallocClassInstance|"
    r"deallocUninitializedObject|slowAlloc|slowDealloc|initStackObject|retain_n|release_n|"
    r"bridgeObjectRetain_n|bridgeObjectRelease_n|unownedRetain\w*|unownedRelease\w*|weak\w*|"
    r"isUniquelyReferenced\w*|setDeallocating)|_swift_release_dealloc|_swift_retain_|_swift_release_|"
    r"swift::RefCounts.*|swift::HeapObjectSideTableEntry.*|.*RefCounts.*)$"
)

# The first identifier of a Swift symbol: $s10GATTClient9ATTEngineC... -> GATTClient. Substitutions (S..., So...)
# are the standard library's or the C module's.
SWIFT_MODULE = re.compile(r"^\$s(\d+)")


def swift_module(name):
    m = SWIFT_MODULE.match(name)
    if not m:
        return None
    n = int(m.group(1))
    start = m.end()
    return name[start:start + n]


RUNTIME = re.compile(
    r"swift_task|swift_continuation|swift_job|StatusRecord|AsyncTask|StackAllocator|TaskAllocator|swift::Job|"
    r"Executor|swift_asyncLet|TaskGroup|TaskLocal|TaskStatus|^_?dispatch_|^\$sSc|swift_cancel|runJobInEstablished|"
    r"swift_concurrency|Continuation|swift_Concurrency|swift_defaultActor|DefaultActor|swift::runJob|_swift_task|"
    r"swift_get_current|swift_distributed")
HELPERS = ("malloc/ARC", "Swift runtime, other", "stdlib", "libc (syscalls, locks, memcpy)")


def group_of(name, obj):
    """The group of one function, from its name and the object file it is in (mirror links the Swift runtime and
    the standard library statically, so for those the name decides; libc is its own object)."""
    base = obj.rsplit("/", 1)[-1] if obj else ""
    bare = name.split("'")[0]  # callgrind marks recursion depth as name'2
    if MALLOC_ARC.match(bare):
        return "malloc/ARC"
    # The tracing decorator, wherever it lived: GATTPeer's ObservedTransport now, MirrorCommandLine's at 45100e5.
    if "ObservedTransport" in bare or "ObservingSink" in bare:
        return "transport decorator"
    # The link's event loop, wherever it lived: LinkCore now, LinuxBluetooth at e81ea3c.
    if "9EventLoop" in bare:
        return "loop"
    # The C shim under the loop and the bearer (CBlueZSocket): the loop's epoll, eventfd, timerfd; the rest is the
    # bearer's socket calls.
    if bare.startswith(("cbz_epoll", "cbz_eventfd", "cbz_timerfd", "cbz_drain")):
        return "loop"
    if bare.startswith("cbz_"):
        return "bearer"
    module = swift_module(bare)
    if module is not None:
        if module == "GATTClient":
            return "engine"
        if module == "LinkCore":
            return "loop"
        if module == "LinuxBluetooth":
            return "bearer"
        if module == "GATTPeer":
            return "transport decorator"
        if module == "ATTStack":
            return "codec"
        if module in ("BenchMeasurement", "MirrorCommandLine", "BareATT", "MirrorCLI", "JSON"):
            return "bench bookkeeping"
        return "other"
    if base.startswith(("libc.so", "libc-", "libpthread", "ld-linux", "libm.so")):
        return "libc (syscalls, locks, memcpy)"
    if RUNTIME.search(bare):
        return "concurrency runtime"
    if bare.startswith(("$ss", "$sS")):
        return "stdlib"
    if bare.startswith(("swift", "_swift", "__swift", "(anonymous namespace)", "bool swift", "void swift",
                        "unsigned int swift", "int swift", "llvm", "__swift::")) or "swift::" in bare:
        return "Swift runtime, other"
    return "other"


def parse(path):
    """Self cost per function and call edges (caller, callee, inclusive cost) of one callgrind output file."""
    names = {}   # fn id -> name
    objs = {}    # ob id -> object path
    fn_obj = {}  # function name -> object path
    self_cost = {}
    edges = {}
    ob = fn = cob = cfn = None
    in_call = False
    with open(path, errors="replace") as f:
        for line in f:
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if in_call:
                    key = (fn, cfn)
                    edges[key] = edges.get(key, 0) + cost
                    in_call = False
                else:
                    self_cost[fn] = self_cost.get(fn, 0) + cost
                continue
            if line.startswith("ob="):
                ob = ref(line[3:], objs)
                cob = None
            elif line.startswith("fn="):
                fn = ref(line[3:], names)
                fn_obj[fn] = ob
                cob = None
            elif line.startswith("cob="):
                cob = ref(line[4:], objs)
            elif line.startswith("cfn="):
                cfn = ref(line[4:], names)
                fn_obj.setdefault(cfn, cob if cob is not None else ob)
            elif line.startswith("calls="):
                in_call = True
            elif line.startswith(("cfi=", "cfl=", "fi=", "fe=", "fl=")):
                pass
    return self_cost, edges, fn_obj


def ref(text, table):
    """A compressed name: '(12) name' defines id 12, '(12)' uses it."""
    text = text.rstrip("\n")
    m = re.match(r"\((\d+)\)(?: (.*))?$", text)
    if not m:
        return text
    if m.group(2) is not None:
        table[m.group(1)] = m.group(2)
    return table.get(m.group(1), "???")


PEER = re.compile(r"PlainPeer.*(serve|acceptLoop|acceptEnhancedLoop)|PlainPeerC5serve|PlainPeerC10acceptLoop")


def summarize(prefix):
    total = 0
    self_g = {g: 0 for g in GROUPS}
    incl_g = {g: 0.0 for g in GROUPS}
    threads = []
    files = sorted(glob.glob(prefix + "-*")) or [prefix]
    for path in files:
        self_cost, edges, fn_obj = parse(path)
        thread_total = sum(self_cost.values())
        peer = any(PEER.search(name or "") for name in self_cost if self_cost[name] > 0)
        threads.append({"file": path.rsplit("/", 1)[-1], "Ir": thread_total, "peer": peer})
        if peer:
            continue
        total += thread_total
        gcache = {}

        def g(name):
            if name not in gcache:
                gcache[name] = group_of(name or "", fn_obj.get(name) or "")
            return gcache[name]

        callers = {}
        for (caller, callee), cost in edges.items():
            if cost > 0 and caller != callee:
                callers.setdefault(callee, []).append((caller, cost))
        # The helpers' instructions flow to their callers, split by callgrind's inclusive call costs, round after
        # round, until they reach a caller that is not a helper (or a helper nobody called in this thread's file,
        # where they stay). A cycle among helpers (a release that runs a deinit that releases) only slows the flow.
        for name, cost in self_cost.items():
            self_g[g(name)] += cost
            if g(name) not in HELPERS:
                incl_g[g(name)] += cost
        mass = {name: float(cost) for name, cost in self_cost.items() if cost and g(name) in HELPERS}
        for _ in range(60):
            if not mass:
                break
            moved = {}
            for h, m in mass.items():
                ins = callers.get(h, [])
                whole = sum(c for _, c in ins)
                if whole == 0:
                    incl_g[g(h)] += m
                    continue
                for c, cost in ins:
                    part = m * cost / whole
                    if g(c) in HELPERS:
                        moved[c] = moved.get(c, 0.0) + part
                    else:
                        incl_g[g(c)] += part
            mass = {h: m for h, m in moved.items() if m > 0.01}
            if len(mass) < len(moved):
                for h, m in moved.items():
                    if m <= 0.01:
                        incl_g[g(h)] += m
        for h, m in mass.items():
            incl_g[g(h)] += m
    return {"threads": threads, "total": total, "self": self_g, "charged": {k: round(v) for k, v in incl_g.items()}}


def top_functions(prefix, count=40):
    """The client's functions by self cost (all threads but the peer's), for a look at what a group holds."""
    costs = {}
    for path in sorted(glob.glob(prefix + "-*")) or [prefix]:
        self_cost, _, fn_obj = parse(path)
        if any(PEER.search(n or "") for n in self_cost if self_cost[n] > 0):
            continue
        for name, cost in self_cost.items():
            key = (name, group_of(name or "", fn_obj.get(name) or ""))
            costs[key] = costs.get(key, 0) + cost
    return costs


def main():
    args = sys.argv[1:]
    if args and args[0] == "--diff":
        small, big, count = json.load(open(args[1])), json.load(open(args[2])), int(args[3])
        peer = lambda run: sum(t["Ir"] for t in run["threads"] if t["peer"])
        out = {"total": (big["total"] - small["total"]) / count,
               "peer": (peer(big) - peer(small)) / count,
               "self": {k: (big["self"][k] - small["self"][k]) / count for k in GROUPS},
               "charged": {k: (big["charged"][k] - small["charged"][k]) / count for k in GROUPS}}
        json.dump(out, sys.stdout, indent=1)
        print()
        return
    if args and args[0] == "--top-diff":
        # --top-diff SMALL_PREFIX BIG_PREFIX COUNT [N]: functions by self cost per write, difference of two runs.
        small, big, count = top_functions(args[1]), top_functions(args[2]), int(args[3])
        n = int(args[4]) if len(args) > 4 else 40
        keys = set(small) | set(big)
        rows = sorted(((big.get(k, 0) - small.get(k, 0)) / count, k) for k in keys)
        for per, (name, grp) in sorted(rows, reverse=True)[:n]:
            print(f"{per:9.1f}  {grp:<28} {name}")
        return
    json.dump(summarize(args[0]), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
