// Apple's policy, biometry type and domain state types.
import Foundation

/// What an evaluation requires.
public enum LAPolicy: Int, Sendable {
    /// The fingerprint only; choosing the fallback returns `userFallback`
    /// and the app offers its own way in.
    case deviceOwnerAuthenticationWithBiometrics = 1
    /// The fingerprint, or the account's password.
    case deviceOwnerAuthentication = 2
}

/// The kind of biometry the machine offers.
public enum LABiometryType: Int, Sendable {
    case none = 0
    /// A fingerprint reader (fprintd).
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

/// The longest reuse window a context accepts, in seconds.
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300

/// The state of the biometry a policy evaluates.
public final class LADomainStateBiometry: NSObject, Sendable {
    public let biometryType: LABiometryType
    /// A digest of the enrolled fingers that changes whenever they change
    /// (a finger added, removed or enrolled again); nil without biometry.
    public let stateHash: Data?

    init(biometryType: LABiometryType, stateHash: Data?) {
        self.biometryType = biometryType
        self.stateHash = stateHash
    }
}

/// The domain state of the context's last preflight or evaluation.
public final class LADomainState: NSObject, Sendable {
    public let biometry: LADomainStateBiometry
    /// The digest of every part of the state (here: the biometry's).
    public let stateHash: Data?

    init(biometry: LADomainStateBiometry) {
        self.biometry = biometry
        self.stateHash = biometry.stateHash
    }
}
