// mirror-docs: prints what is generated from `mirror`'s command table: the man page (`man`) or the bash
// completion (`completion`). tools/mirror-docs.sh writes both into docs/mirror.1 and tools/completion/mirror.bash.
import MirrorCommandLine
import MirrorReference

#if canImport(Glibc)
import Glibc
#endif

let specs = commandTable.map(\.spec)
switch CommandLine.arguments.dropFirst().first {
case "man":
    print(manPage(specs), terminator: "")
case "completion":
    print(bashCompletion(specs), terminator: "")
default:
    Console().err("usage: mirror-docs man|completion   (the man page in roff, or the bash completion script, on stdout)")
    exit(2)
}
