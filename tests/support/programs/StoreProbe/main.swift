// la-store-probe: a test tool over the real LocalAuth ledger and FileStateStore.
// All logic is in Probe.swift; see `run(arguments:)` there for the commands.
import Glibc

exit(run(arguments: Array(CommandLine.arguments.dropFirst())))
