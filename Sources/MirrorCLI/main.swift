// mirror: the command-line tool. Thin: parse arguments, call the libraries, print text or JSON.
// The commands are in Commands/, listed in CommandTable.swift; the framework is in MirrorCommandLine.
import MirrorCommandLine

#if canImport(Glibc)
import Glibc
#endif

let status = await MirrorMain.run(Array(CommandLine.arguments.dropFirst()), commands: commandTable)
exit(status)
