// The password check: a separate PAM transaction on the passcode service
// whose conversation answers exactly one echo-off prompt; anything else
// makes the verdict "wrong", and a stack that never asked gave none.
import LocalAuth
import LibcSystem

public struct PAMPasscodeVerifier: PasscodeVerifier {
    let service: [UInt8]
    let tty: [UInt8]
    let remoteHost: [UInt8]
    let requestingUser: [UInt8]
    private var transaction = LibPAMTransaction()
    private var started = false

    public init(service: [UInt8], tty: [UInt8], remoteHost: [UInt8], requestingUser: [UInt8]) {
        self.service = service
        self.tty = tty
        self.remoteHost = remoteHost
        self.requestingUser = requestingUser
    }

    public mutating func begin(userName: [UInt8]) -> Bool {
        end()
        started = transaction.start(service: service, user: userName, tty: tty, remoteHost: remoteHost, requestingUser: requestingUser)
        return started
    }

    public mutating func verify(_ passcode: SecretBuffer) -> PasscodeVerdict {
        guard started, !passcode.overflowed, passcode.count > 0, let (code, answered, violated) = transaction.authenticate(passcode) else {
            return .wrong
        }
        if answered == 0 && !violated { return .noVerdict }
        return code == PAMValue.success && answered == 1 && !violated ? .correct : .wrong
    }

    public mutating func end() {
        transaction.end()
        started = false
    }
}
