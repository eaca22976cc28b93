/* The machine key sealed to a TPM 2.0 through tpm2-tss's ESAPI, loaded with
 * dlopen (tpm_seal.h says why). The storage key is the TCG's standard ECC
 * P-256 primary under the owner hierarchy, made again on each use (the same
 * key while the TPM keeps its owner seed; another once it is cleared). The
 * key is sealed in a keyed-hash object under it; the sealed part crosses the
 * bus encrypted by a session salted to the storage key, so a passive
 * listener on a discrete TPM's bus learns nothing. */
#define _GNU_SOURCE
#include "tpm_seal.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_tcti.h>

/* The ESAPI and marshalling functions used, found once. */
static struct {
    int state; /* 0: not tried; 1: found; -1: missing */
    TSS2_RC (*initialize)(ESYS_CONTEXT **, TSS2_TCTI_CONTEXT *, TSS2_ABI_VERSION *);
    void (*finalize)(ESYS_CONTEXT **);
    TSS2_RC (*create_primary)(ESYS_CONTEXT *, ESYS_TR, ESYS_TR, ESYS_TR, ESYS_TR, const TPM2B_SENSITIVE_CREATE *,
                              const TPM2B_PUBLIC *, const TPM2B_DATA *, const TPML_PCR_SELECTION *, ESYS_TR *,
                              TPM2B_PUBLIC **, TPM2B_CREATION_DATA **, TPM2B_DIGEST **, TPMT_TK_CREATION **);
    TSS2_RC (*create)(ESYS_CONTEXT *, ESYS_TR, ESYS_TR, ESYS_TR, ESYS_TR, const TPM2B_SENSITIVE_CREATE *,
                      const TPM2B_PUBLIC *, const TPM2B_DATA *, const TPML_PCR_SELECTION *, TPM2B_PRIVATE **,
                      TPM2B_PUBLIC **, TPM2B_CREATION_DATA **, TPM2B_DIGEST **, TPMT_TK_CREATION **);
    TSS2_RC (*load)(ESYS_CONTEXT *, ESYS_TR, ESYS_TR, ESYS_TR, ESYS_TR, const TPM2B_PRIVATE *, const TPM2B_PUBLIC *,
                    ESYS_TR *);
    TSS2_RC (*unseal)(ESYS_CONTEXT *, ESYS_TR, ESYS_TR, ESYS_TR, ESYS_TR, TPM2B_SENSITIVE_DATA **);
    TSS2_RC (*flush)(ESYS_CONTEXT *, ESYS_TR);
    TSS2_RC (*start_session)(ESYS_CONTEXT *, ESYS_TR, ESYS_TR, ESYS_TR, ESYS_TR, ESYS_TR, const TPM2B_NONCE *,
                             TPM2_SE, const TPMT_SYM_DEF *, TPMI_ALG_HASH, ESYS_TR *);
    TSS2_RC (*set_attributes)(ESYS_CONTEXT *, ESYS_TR, TPMA_SESSION, TPMA_SESSION);
    void (*free)(void *);
    TSS2_RC (*public_marshal)(TPM2B_PUBLIC const *, uint8_t[], size_t, size_t *);
    TSS2_RC (*public_unmarshal)(uint8_t const[], size_t, size_t *, TPM2B_PUBLIC *);
    TSS2_RC (*private_marshal)(TPM2B_PRIVATE const *, uint8_t[], size_t, size_t *);
    TSS2_RC (*private_unmarshal)(uint8_t const[], size_t, size_t *, TPM2B_PRIVATE *);
} tss;

#define FIND(library, field, symbol) ((*(void **)&tss.field = dlsym(library, symbol)) != NULL)

static int tss_found(void) {
    if (tss.state) return tss.state > 0;
    tss.state = -1;
    /* tpm2-tss logs to the standard error unless told not to: the helper
       writes nothing there (its environment was emptied before this). */
    setenv("TSS2_LOG", "all+NONE", 1);
    void *esys = dlopen("libtss2-esys.so.0", RTLD_NOW | RTLD_LOCAL);
    void *mu = dlopen("libtss2-mu.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!esys || !mu) return 0;
    if (FIND(esys, initialize, "Esys_Initialize") && FIND(esys, finalize, "Esys_Finalize") &&
        FIND(esys, create_primary, "Esys_CreatePrimary") && FIND(esys, create, "Esys_Create") &&
        FIND(esys, load, "Esys_Load") && FIND(esys, unseal, "Esys_Unseal") && FIND(esys, flush, "Esys_FlushContext") &&
        FIND(esys, start_session, "Esys_StartAuthSession") && FIND(esys, set_attributes, "Esys_TRSess_SetAttributes") &&
        FIND(esys, free, "Esys_Free") && FIND(mu, public_marshal, "Tss2_MU_TPM2B_PUBLIC_Marshal") &&
        FIND(mu, public_unmarshal, "Tss2_MU_TPM2B_PUBLIC_Unmarshal") &&
        FIND(mu, private_marshal, "Tss2_MU_TPM2B_PRIVATE_Marshal") &&
        FIND(mu, private_unmarshal, "Tss2_MU_TPM2B_PRIVATE_Unmarshal"))
        tss.state = 1;
    return tss.state > 0;
}

/* An open connection: the transport (a TCTI module named by the caller) and
 * the ESAPI context over it. */
struct connection {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
};

static void disconnect(struct connection *c) {
    if (c->esys) tss.finalize(&c->esys);
    if (c->tcti) {
        Tss2_Tcti_Finalize(c->tcti);
        free(c->tcti);
    }
    c->tcti = NULL;
}

static int connect_tpm(struct connection *c, const char *tcti, const char *config) {
    memset(c, 0, sizeof *c);
    const char *library = strcmp(tcti, "device") == 0  ? "libtss2-tcti-device.so.0"
                          : strcmp(tcti, "swtpm") == 0 ? "libtss2-tcti-swtpm.so.0"
                                                       : NULL;
    if (!library || !tss_found()) return LA_TPM_UNREACHABLE;
    void *module = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    TSS2_TCTI_INFO_FUNC info_of = NULL;
    if (!module || (*(void **)&info_of = dlsym(module, TSS2_TCTI_INFO_SYMBOL)) == NULL) return LA_TPM_UNREACHABLE;
    const TSS2_TCTI_INFO *info = info_of();
    size_t size = 0;
    if (!info || !info->init || info->init(NULL, &size, config) != TSS2_RC_SUCCESS || size == 0) return LA_TPM_UNREACHABLE;
    c->tcti = calloc(1, size);
    if (!c->tcti) return LA_TPM_FAILED;
    if (info->init(c->tcti, &size, config) != TSS2_RC_SUCCESS) {
        free(c->tcti);
        c->tcti = NULL;
        return LA_TPM_UNREACHABLE;
    }
    if (tss.initialize(&c->esys, c->tcti, NULL) != TSS2_RC_SUCCESS) {
        c->esys = NULL;
        disconnect(c);
        return LA_TPM_UNREACHABLE;
    }
    return LA_TPM_DONE;
}

/* What an answer means: the transport's failure is an unreachable TPM;
 * anything else is a failure that decides nothing. */
static int outcome(TSS2_RC rc) {
    if (rc == TSS2_RC_SUCCESS) return LA_TPM_DONE;
    return (rc & TSS2_RC_LAYER_MASK) == TSS2_TCTI_RC_LAYER ? LA_TPM_UNREACHABLE : LA_TPM_FAILED;
}

/* The owner hierarchy's storage key (the TCG's ECC P-256 template). */
static TSS2_RC storage_key(ESYS_CONTEXT *esys, ESYS_TR *primary) {
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_PUBLIC template = {0};
    template.publicArea.type = TPM2_ALG_ECC;
    template.publicArea.nameAlg = TPM2_ALG_SHA256;
    template.publicArea.objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM |
                                           TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                                           TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    TPMS_ECC_PARMS *ecc = &template.publicArea.parameters.eccDetail;
    ecc->symmetric.algorithm = TPM2_ALG_AES;
    ecc->symmetric.keyBits.aes = 128;
    ecc->symmetric.mode.aes = TPM2_ALG_CFB;
    ecc->scheme.scheme = TPM2_ALG_NULL;
    ecc->curveID = TPM2_ECC_NIST_P256;
    ecc->kdf.scheme = TPM2_ALG_NULL;
    template.publicArea.unique.ecc.x.size = 32;
    template.publicArea.unique.ecc.y.size = 32;
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    return tss.create_primary(esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                              &template, &outside, &pcrs, primary, NULL, NULL, NULL, NULL);
}

/* A session salted to the storage key that encrypts the first parameter
 * both ways (the key going in, the key coming out). */
static TSS2_RC salted_session(ESYS_CONTEXT *esys, ESYS_TR primary, ESYS_TR *session) {
    TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB};
    TSS2_RC rc = tss.start_session(esys, primary, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL,
                                   TPM2_SE_HMAC, &symmetric, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    return tss.set_attributes(esys, *session,
                              TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT | TPMA_SESSION_CONTINUESESSION, 0xff);
}

static void flush(ESYS_CONTEXT *esys, ESYS_TR *handle) {
    if (*handle != ESYS_TR_NONE) (void)tss.flush(esys, *handle);
    *handle = ESYS_TR_NONE;
}

/* A blob: "LATS", version 1, three zero bytes, the public part, the private. */
static const unsigned char blob_header[8] = {'L', 'A', 'T', 'S', 1, 0, 0, 0};

static int seal_here(const char *tcti, const char *config, const unsigned char *key, size_t key_length,
                     unsigned char *blob, size_t blob_capacity, size_t *blob_length) {
    *blob_length = 0;
    if (key_length == 0 || key_length > 64 || blob_capacity < sizeof blob_header) return LA_TPM_FAILED;
    struct connection c;
    int result = connect_tpm(&c, tcti, config);
    if (result != LA_TPM_DONE) return result;
    ESYS_TR primary = ESYS_TR_NONE, session = ESYS_TR_NONE;
    TPM2B_PRIVATE *private = NULL;
    TPM2B_PUBLIC *public = NULL;
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    sensitive.sensitive.data.size = (UINT16)key_length;
    memcpy(sensitive.sensitive.data.buffer, key, key_length);
    TPM2B_PUBLIC template = {0};
    template.publicArea.type = TPM2_ALG_KEYEDHASH;
    template.publicArea.nameAlg = TPM2_ALG_SHA256;
    template.publicArea.objectAttributes =
        TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    TSS2_RC rc = storage_key(c.esys, &primary);
    if (rc == TSS2_RC_SUCCESS) rc = salted_session(c.esys, primary, &session);
    if (rc == TSS2_RC_SUCCESS)
        rc = tss.create(c.esys, primary, session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template, &outside, &pcrs,
                        &private, &public, NULL, NULL, NULL);
    explicit_bzero(&sensitive, sizeof sensitive);
    result = outcome(rc);
    if (result == LA_TPM_DONE) {
        size_t offset = sizeof blob_header;
        memcpy(blob, blob_header, sizeof blob_header);
        if (tss.public_marshal(public, blob, blob_capacity, &offset) != TSS2_RC_SUCCESS ||
            tss.private_marshal(private, blob, blob_capacity, &offset) != TSS2_RC_SUCCESS)
            result = LA_TPM_FAILED;
        else
            *blob_length = offset;
    }
    if (private) tss.free(private);
    if (public) tss.free(public);
    flush(c.esys, &session);
    flush(c.esys, &primary);
    disconnect(&c);
    return result;
}

static int unseal_here(const char *tcti, const char *config, const unsigned char *blob, size_t blob_length,
                       unsigned char *key, size_t key_capacity, size_t *key_length) {
    *key_length = 0;
    TPM2B_PUBLIC public = {0};
    TPM2B_PRIVATE private = {0};
    size_t offset = sizeof blob_header;
    if (blob_length < sizeof blob_header || blob_length > LA_TPM_BLOB_MAX ||
        memcmp(blob, blob_header, sizeof blob_header) != 0)
        return LA_TPM_BAD_BLOB;
    if (!tss_found()) return LA_TPM_UNREACHABLE;
    if (tss.public_unmarshal(blob, blob_length, &offset, &public) != TSS2_RC_SUCCESS ||
        tss.private_unmarshal(blob, blob_length, &offset, &private) != TSS2_RC_SUCCESS || offset != blob_length)
        return LA_TPM_BAD_BLOB;
    struct connection c;
    int result = connect_tpm(&c, tcti, config);
    if (result != LA_TPM_DONE) return result;
    ESYS_TR primary = ESYS_TR_NONE, session = ESYS_TR_NONE, item = ESYS_TR_NONE;
    TPM2B_SENSITIVE_DATA *data = NULL;
    TSS2_RC rc = storage_key(c.esys, &primary);
    result = outcome(rc);
    if (result == LA_TPM_DONE) {
        rc = tss.load(c.esys, primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &private, &public, &item);
        /* The TPM itself saying the blob's integrity does not check under
           its storage key (TPM_RC_INTEGRITY, whatever parameter it names)
           means another TPM's blob, or this one's before a clear. Nothing
           else does: a missing handle, a refused authorization or a size is
           not proof. */
        if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER && (rc & (TPM2_RC_FMT1 | 0x3F)) == TPM2_RC_INTEGRITY)
            result = LA_TPM_NOT_ITS_OWN;
        else
            result = outcome(rc);
    }
    if (result == LA_TPM_DONE) result = outcome(salted_session(c.esys, primary, &session));
    if (result == LA_TPM_DONE) result = outcome(tss.unseal(c.esys, item, session, ESYS_TR_NONE, ESYS_TR_NONE, &data));
    if (result == LA_TPM_DONE) {
        if (data->size == 0 || data->size > key_capacity)
            result = LA_TPM_BAD_BLOB;
        else {
            memcpy(key, data->buffer, data->size);
            *key_length = data->size;
        }
    }
    if (data) {
        explicit_bzero(data, sizeof *data);
        tss.free(data);
    }
    flush(c.esys, &item);
    flush(c.esys, &session);
    flush(c.esys, &primary);
    disconnect(&c);
    return result;
}

/* tpm2-tss keeps copies of what crosses the bus (its context, the command
 * and response buffers, where the key is encrypted and decrypted in place)
 * and frees them unwiped. So each conversation runs in a child process that
 * hands back only its answer and the bytes, then ends: what the library
 * left goes with its memory. The helper is single-threaded. */
struct answer {
    int result;
    size_t length;
};

static int read_all(int fd, unsigned char *into, size_t length) {
    size_t done = 0;
    while (done < length) {
        ssize_t got = read(fd, into + done, length - done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        done += (size_t)got;
    }
    return 0;
}

static void write_all(int fd, const unsigned char *from, size_t length) {
    size_t done = 0;
    while (done < length) {
        ssize_t put = write(fd, from + done, length - done);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return;
        done += (size_t)put;
    }
}

/* Closes every descriptor from `first` to `last`: close_range, or one by
 * one where a seccomp profile refuses it. */
static void close_from(unsigned first, unsigned last) {
    if (first > last) return;
    if (syscall(SYS_close_range, first, last, 0) == 0) return;
    long most = sysconf(_SC_OPEN_MAX);
    unsigned end = most > 0 && most < 65536 ? (unsigned)most : 65536;
    for (unsigned fd = first; fd <= last && fd < end; fd++) close((int)fd);
}

/* The child keeps nothing of the helper's but the pipe: no caller's socket,
 * no lock's descriptor (the helper's own keep the locks), the standard
 * descriptors on /dev/null. It dies with the helper, and a second before
 * the helper's deadline (timers are not inherited; the helper's deadline
 * handler takes back the caller's ids, after which the parent-death signal
 * can no longer reach a root child): 30 s where the helper had none.
 * Returns the pipe's descriptor. */
static int child_alone(int pipe_end, pid_t parent, unsigned seconds_left) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
    int fd = pipe_end >= 3 ? pipe_end : fcntl(pipe_end, F_DUPFD_CLOEXEC, 3);
    if (fd < 3) _exit(1);
    close_from(0, (unsigned)fd - 1);
    close_from((unsigned)fd + 1, ~0U);
    for (int standard = 0; standard < 3; standard++)
        if (open("/dev/null", O_RDWR) != standard) _exit(1);
    signal(SIGALRM, SIG_DFL);
    alarm(seconds_left > 1 ? seconds_left - 1 : seconds_left == 1 ? 1 : 30);
    return fd;
}

/* Runs `seal` (1) or unseal (0) in a child; its output goes to `out`. */
static int in_child(int seal, const char *tcti, const char *config, const unsigned char *input, size_t input_length,
                    unsigned char *out, size_t capacity, size_t *length) {
    *length = 0;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return LA_TPM_FAILED;
    pid_t parent = getpid();
    unsigned seconds_left = alarm(0);
    if (seconds_left) alarm(seconds_left);
    pid_t child = fork();
    if (child < 0) {
        close(fds[0]);
        close(fds[1]);
        return LA_TPM_FAILED;
    }
    if (child == 0) {
        close(fds[0]);
        fds[1] = child_alone(fds[1], parent, seconds_left);
        struct answer answer = {0};
        answer.result = seal ? seal_here(tcti, config, input, input_length, out, capacity, &answer.length)
                             : unseal_here(tcti, config, input, input_length, out, capacity, &answer.length);
        write_all(fds[1], (const unsigned char *)&answer, sizeof answer);
        if (answer.result == LA_TPM_DONE) write_all(fds[1], out, answer.length);
        explicit_bzero(out, capacity);
        _exit(0);
    }
    close(fds[1]);
    struct answer answer = {LA_TPM_FAILED, 0};
    int result = LA_TPM_FAILED;
    if (read_all(fds[0], (unsigned char *)&answer, sizeof answer) == 0) {
        if (answer.result != LA_TPM_DONE)
            result = answer.result;
        else if (answer.length > 0 && answer.length <= capacity && read_all(fds[0], out, answer.length) == 0) {
            *length = answer.length;
            result = LA_TPM_DONE;
        }
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    if (result == LA_TPM_DONE && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) result = LA_TPM_FAILED;
    if (result != LA_TPM_DONE) {
        explicit_bzero(out, capacity);
        *length = 0;
    }
    return result;
}

int la_tpm_seal(const char *tcti, const char *config, const unsigned char *key, size_t key_length,
                unsigned char *blob, size_t blob_capacity, size_t *blob_length) {
    return in_child(1, tcti, config, key, key_length, blob, blob_capacity, blob_length);
}

int la_tpm_unseal(const char *tcti, const char *config, const unsigned char *blob, size_t blob_length,
                  unsigned char *key, size_t key_capacity, size_t *key_length) {
    return in_child(0, tcti, config, blob, blob_length, key, key_capacity, key_length);
}
