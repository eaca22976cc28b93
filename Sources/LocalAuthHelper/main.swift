// localauth-helper: installed setuid root; everything it does is in
// HelperService, which starts by making the process wholly root's.
import LocalAuth
import LibcSystem
import PAMAndBusAdapters

Syscalls.exitProcess(HelperService.run().rawValue)
