// The helper's secret actions (docs/DESIGN.md, "Secrets"): the caller's own
// items only, under the apps' service and its switch. What the helper knows
// is gathered first without asking anything; SecretPolicy decides the step;
// an evaluation runs through the same engine, records and rules as every
// prompt (no reuse window); then the keeper acts, and the status and the
// RESULT go out. Re-wrapping the user's key with a password that passed
// runs after the verdict, and Argon2id only when a copy is stale.
import LocalAuth
import LibcSystem
import PAMAndBusAdapters
import Secrets

extension HelperSession {
    mutating func serveSecret(_ request: HelperRequest, target: UserIdentity, scope: ScopeDecision, options: Options,
                              prompter: ChannelPrompter, _ log: inout HelperLog) -> HelperExit {
        guard state.version >= 4 else { return refuse(.badSecretRequest, &log) }
        let keeper = SecretKeeper(items: ItemStore(stateDirectory: options.stateDir, uid: target.uid, accountName: target.name, tpm: options.tpm))
        let secret = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)
        defer {
            secret.wipe()
            logMachineKeyNotice(keeper.items, &log)
        }
        // A store's secret follows its request at once.
        if request.action == .secretStore {
            switch channel.receive(deadline: Syscalls.bootTimeNanoseconds() + HelperService.openingSeconds * 1_000_000_000, secret: secret) {
            case .success(let frame) where frame.type == .secret: break
            case .success(let frame): return protocolFailure(.outOfOrder(frame.type), &log)
            case .failure(let violation): return protocolFailure(violation, &log)
            }
        }
        let item = printableText(request.item)
        // A uid reused by a new account never reaches the former one's secrets.
        guard settle(keeper, userName: target.name, &log) else { return finishSecret(.storeFailed, outcome: nil, &log) }
        var facts = SecretFacts(action: request.action, requirement: request.access, itemPresent: false, key: .none,
                                interactive: request.interactive)
        // The enrolled set is asked of fprintd only for an item bound to it
        // (nothing else reads it): a store of one, or a load of one.
        var digest: [UInt8]? = nil
        func readBinding() {
            digest = secretBinding(userName: target.name)
            facts.enrollmentKnown = digest != nil
        }
        do throws(ItemStore.Failure) {
            switch request.action {
            case .secretLoad:
                if let stored = try keeper.items.load(request.item) {
                    facts.itemPresent = true
                    facts.requirement = stored.requirement
                } else if try keeper.items.hasFile(for: request.item) {
                    log.log(.error, "uid \(target.uid): the secret \(item) is not a sound item; it is kept as it is")
                    return finishSecret(.storeFailed, outcome: nil, &log)
                }
                if facts.requirement.bindsEnrollment { readBinding() }
                if facts.itemPresent { facts.key = try keeper.keyState() }
                // Whether it opens now, before anything is asked: an item
                // bound to fingers that changed is deleted unasked. Never
                // while the enrollment is unknown (that would delete it).
                if facts.key == .opens && (!facts.requirement.bindsEnrollment || digest != nil) {
                    let scratch = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)
                    defer { scratch.wipe() }
                    switch try keeper.load(request.item, enrollmentDigest: digest ?? [], into: scratch) {
                    case .opened: facts.itemOpens = true
                    case .absent: facts.itemPresent = false
                    case .invalidated:
                        facts.itemOpens = false
                        log.log(.notice, "uid \(target.uid): the enrolled fingers changed; the secret \(item) bound to them is deleted")
                    case .unopenable:
                        facts.itemOpens = false
                        log.log(.error, "uid \(target.uid): the secret \(item) does not open with the user's key; it is kept as it is")
                    }
                }
            case .secretStore:
                if request.access.bindsEnrollment { readBinding() }
                facts.key = try keeper.keyState()
                if request.access.needsEnrolledFinger {
                    var preflight = makeSystemEngine(options, RequestFacts(mode: .prompt, channel: channel.fd), prompter: prompter, log: log)
                    facts.fingerMissing = SecretPolicy.fingerMissing(preflight.canEvaluate(.biometrics, user: target, service: request.service))
                }
            case .secretDelete:
                facts.itemPresent = try keeper.items.hasFile(for: request.item)
            case .secretList, .evaluate, .check:
                break
            }
        } catch {
            log.log(.error, "uid \(target.uid): the secrets could not be read: \(storeFailureText(error))")
            return finishSecret(.storeFailed, outcome: nil, &log)
        }

        var password: SecretBuffer? = nil
        let passcode = SecretBuffer()
        defer { passcode.wipe() }
        var granted: Outcome? = nil
        switch SecretPolicy.firstStep(facts) {
        case .answer(let status): return finishSecret(status, outcome: nil, &log)
        case .deny(let error): return finishSecret(.denied, outcome: .failure(error), &log)
        case .act: break
        case .evaluate(let policy, let passwordOnly):
            var evaluated = options
            evaluated.policy = policy
            if request.action == .secretLoad { evaluated.reason = UserText.secretReason(options.reason, item: request.item) }
            // Apple's sheet, whatever mode the caller asks: the reader at
            // once, the password after a miss (or alone, where only it
            // opens the key); never touch or type, which would let the
            // password come first for an item whose finger works.
            let mode = passwordOnly ? InteractionMode.password : .scan
            var asked = request
            asked.clientReadsKeys = false
            var engine = makeSystemEngine(evaluated, RequestFacts(mode: mode, channel: channel.fd), prompter: prompter, log: log)
            let outcome: Outcome
            switch runEvaluation(asked, scope: scope, userName: target.name, target: target, options: evaluated, mode: mode,
                                 session: LogindSession.callerSession(), passcode: passcode, engine: &engine, &log) {
            case .success(let ended): outcome = ended.0
            case .failure(let exit): return exit
            }
            guard case .success(let method) = outcome else { return finishSecret(.denied, outcome: outcome, &log) }
            if request.action == .secretLoad && !SecretPolicy.releases(facts.requirement, by: method) {
                log.log(.error, "uid \(target.uid): a grant by password cannot release the finger-only secret \(item)")
                return finishSecret(.denied, outcome: .failure(.authenticationFailed), &log)
            }
            granted = outcome
            if method == .passcode { password = passcode } else { passcode.wipe() }
            // The fingers as they are after the touch: an enrollment
            // changed while the reader waited fails a bound item's seal.
            // One fprintd does not tell now judges nothing and deletes
            // nothing.
            if facts.requirement.bindsEnrollment { readBinding() }
        }
        if facts.requirement.bindsEnrollment && digest == nil && (request.action == .secretStore || request.action == .secretLoad) {
            log.log(.notice, "uid \(target.uid): fprintd did not say which fingers are enrolled; the secret \(item) is left as it is")
            return finishSecret(.denied, outcome: .failure(.biometryNotAvailable), &log)
        }

        let status = act(request, keeper: keeper, target: target, digest: digest, secret: secret, password: password, &log)
        if status == .done && request.action == .secretLoad {
            guard channel.sendSecret(.secret, secret, deadline: Syscalls.bootTimeNanoseconds() + 5_000_000_000) else {
                log.log(.notice, "client of uid \(callerUID) gone before the secret")
                return .protocolError
            }
        }
        secret.wipe()
        let exit = finishSecret(status, outcome: status == .done ? granted : nil, &log)
        if let password { rememberAfterVerdict(password, keeper: keeper, userName: target.name, &log) }
        return exit
    }

    /// The action itself, after the step allowed it.
    func act(_ request: HelperRequest, keeper: SecretKeeper, target: UserIdentity, digest: [UInt8]?, secret: SecretBuffer,
             password: SecretBuffer?, _ log: inout HelperLog) -> SecretStatus {
        let item = printableText(request.item)
        do throws(ItemStore.Failure) {
            switch request.action {
            case .secretList:
                for identifier in try keeper.items.identifiers() {
                    guard channel.send(.itemName, identifier, deadline: Syscalls.bootTimeNanoseconds() + 5_000_000_000) else {
                        return .storeFailed
                    }
                }
                return .done
            case .secretDelete:
                guard try keeper.delete(request.item) else { return .absent }
                log.log(.notice, "uid \(target.uid): the secret \(item) is deleted")
                return .done
            case .secretStore:
                try keeper.store(secret, identifier: request.item, requirement: request.access, enrollmentDigest: digest ?? [],
                                 wallSeconds: Syscalls.wallSeconds(), password: password)
                log.log(.notice, "uid \(target.uid): the secret \(item) is stored (\(request.access.name))")
                return .done
            case .secretLoad:
                switch try keeper.load(request.item, enrollmentDigest: digest ?? [], password: password, into: secret) {
                case .opened:
                    log.log(.notice, "uid \(target.uid): the secret \(item) is released")
                    return .done
                case .absent: return .absent
                case .invalidated:
                    log.log(.notice, "uid \(target.uid): the enrolled fingers changed; the secret \(item) bound to them is deleted")
                    return .invalidated
                case .unopenable:
                    log.log(.error, "uid \(target.uid): the secret \(item) does not open with the user's key")
                    return password == nil ? .keyNeedsPassword : .storeFailed
                }
            case .evaluate, .check:
                return .storeFailed
            }
        } catch {
            switch error {
            case .quotaReached: return .quotaReached
            case .keyUnavailable: return .keyNeedsPassword
            default:
                log.log(.error, "uid \(target.uid): the secrets could not be read or written: \(storeFailureText(error))")
                return .storeFailed
            }
        }
    }

    /// SECRET_STATUS, then the RESULT it goes with.
    func finishSecret(_ status: SecretStatus, outcome: Outcome?, _ log: inout HelperLog) -> HelperExit {
        guard channel.send(.secretStatus, [status.rawValue], deadline: Syscalls.bootTimeNanoseconds() + 5_000_000_000) else {
            log.log(.notice, "client of uid \(callerUID) gone before the result")
            return .protocolError
        }
        return finish(SecretVerdict.result(status, outcome: outcome), &log)
    }

    /// A right password passed through the helper, and its verdict has
    /// gone out: the user's key's copies are brought up to date with it.
    /// The channel is closed first; the client waits for this process to
    /// end, which costs it Argon2id only when a copy was stale (the marker
    /// of the account's password hash tells that without it).
    func rememberAfterVerdict(_ password: SecretBuffer, keeper: SecretKeeper, userName: [UInt8], _ log: inout HelperLog) {
        defer { password.wipe() }
        // Most accounts keep no secrets: nothing to do. A former account's
        // key under a reused uid is moved aside, never re-wrapped.
        guard settle(keeper, userName: userName, &log), (try? keeper.hasKey()) == true else { return }
        channel.close()
        var accountHash = Syscalls.accountPasswordHash(userName)
        defer { accountHash?.withUnsafeMutableBufferPointer { Syscalls.wipe($0.baseAddress!, count: $0.count) } }
        do throws(ItemStore.Failure) {
            if try keeper.rememberPassword(password, accountHash: accountHash) {
                log.log(.notice, "uid \(keeper.items.uid): the secrets key's copies were checked with the password")
            }
        } catch {
            log.log(.error, "uid \(keeper.items.uid): the secrets key's copies could not be brought up to date: \(storeFailureText(error))")
        }
        logMachineKeyNotice(keeper.items, &log)
    }
}

/// What the administrator hears about the machine key, once it was had.
func logMachineKeyNotice(_ items: ItemStore, _ log: inout HelperLog) {
    switch items.machineKeyNotice {
    case .sealedAnew?:
        log.log(.warning, "the TPM no longer opens the sealed machine key (cleared, or another machine's): a new one is sealed; each user's next password heals their secrets")
    case .sealFailedUsingFile?:
        log.log(.warning, "the TPM would not seal the machine key: it is a root-only file instead")
    case .fileKeySealed?:
        log.log(.notice, "the machine key is now sealed to the TPM; its root-only file is removed")
    case .fileKeyNotRemoved?:
        log.log(.error, "the sealed machine key's root-only file could not be removed: the key is on the disk in the clear")
    case .fileKeyDiffers?:
        log.log(.warning, "a root-only machine key made while tpm = off lies beside the sealed one: users whose secrets it wraps type their password once; it is kept")
    case nil: break
    }
}

extension HelperSession {
    /// `ItemStore.settleOwner`, logged: false when the store cannot be read.
    func settle(_ keeper: SecretKeeper, userName: [UInt8], _ log: inout HelperLog) -> Bool {
        do throws(ItemStore.Failure) {
            if let former = try keeper.items.settleOwner(userName) {
                log.log(.notice, "uid \(keeper.items.uid): the secrets of a former account of this uid (\(printableText(former))) were moved aside")
            }
            return true
        } catch {
            log.log(.error, "uid \(keeper.items.uid): the secrets could not be read: \(storeFailureText(error))")
            return false
        }
    }
}

/// An item store's failure for the log.
func storeFailureText(_ failure: ItemStore.Failure) -> String {
    switch failure {
    case .unsafeDirectory: return "a directory on the way is not root's alone"
    case .quotaReached: return "the quota is reached"
    case .notAnItem: return "not an item"
    case .keyUnavailable: return "the user's key cannot be opened without the password"
    case .oddFile(let name): return "\(printableText(name)) is not as the store makes it (owner, mode, size or links): left for root to look at"
    case .tpmUnreachable: return "the TPM that seals the machine key cannot be reached (tpm = off makes a root-only key; each user's password then heals their secrets)"
    case .tpmFailed: return "the TPM refused to seal or unseal the machine key"
    case .io(let errno): return errno.text
    }
}
