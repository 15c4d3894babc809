// mirror: the command-line tool. Only the entry point: the commands, the session, parsing, formatting and
// the error table are the MirrorCommandLine library (Sources/MirrorCommandLine, the table in Commands/CommandTable.swift).
import MirrorCommandLine

#if canImport(Glibc)
import Glibc
#endif

let status = await MirrorMain.run(Array(CommandLine.arguments.dropFirst()), commands: commandTable)
exit(status)
