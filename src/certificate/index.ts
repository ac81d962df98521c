/**
 * Certificates of the node (upstream pkg/kubelet/certificate): TLS bootstrap of the
 * client certificate from a bootstrap token, and `CertificateManager`, which rotates
 * the client or serving certificate through the certificates.k8s.io API. Test support
 * (test-ca.ts, test-util.ts) is not re-exported.
 */
export {
  BootstrapError,
  CLIENT_PAIR,
  bootstrapClientCertificate,
  bootstrapKubeconfigText,
  digestedCsrName,
  type BootstrapOptions,
  type BootstrapResult,
} from './bootstrap.ts';
export {
  CLIENT_SIGNER,
  CLIENT_USAGES,
  CsrError,
  SERVING_SIGNER,
  SERVING_USAGES,
  clientTemplate,
  createCsr,
  generateKey,
  servingTemplate,
  type CsrTemplate,
} from './csr.ts';
export {
  CertificateManager,
  nextRotationDeadline,
  satisfiesTemplate,
  type CertificateKind,
  type CertificateManagerOptions,
  type CertificateManagerState,
  type CertificateMetrics,
  type RotateListener,
} from './manager.ts';
export {
  CSRS,
  CertificateRequestError,
  createCsrObject,
  issuedCertificate,
  waitForCertificate,
  type CertificateRequestErrorCode,
  type CsrSpec,
  type WaitOptions,
} from './request.ts';
export {
  CertificateStore,
  CertificateStoreError,
  validatePair,
  type CertificatePair,
  type CertificateStoreErrorCode,
  type CertificateStoreOptions,
  type StoreLoad,
} from './store.ts';
