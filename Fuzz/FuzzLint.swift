// Fuzz target: the PAM stack lint's parser. The input is the service file
// "sudo"; an include or substack names the same bytes again, so nesting and
// loops are exercised too.
import StackLint
func fuzzOne(_ bytes: [UInt8]) {
    let lint = StackLint(read: { name in name.count <= 64 ? bytes : nil })
    _ = lint.serviceFindings("sudo")
    _ = lint.passcodeServiceFindings("localauth-passcode")
}
