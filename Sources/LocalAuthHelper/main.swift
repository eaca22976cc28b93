// localauth-helper: installed setuid root; everything it does is in
// HelperService, which starts by making the process wholly root's.
import LocalAuth
import LocalAuthSystem
import SystemAdapters

Syscalls.exitProcess(HelperService.run().rawValue)
