import LocalAuthCLI

// localauth(1): everything is in LocalAuthCLI.run(arguments:).
terminate(run(arguments: CommandLine.arguments))
