// Layers of src/ (ARCHITECTURE.md, "Layers"): each folder imports only from its own
// layer or the ones below it, and nothing in src/ takes part in an import cycle —
// type-only imports included, since a type cycle is a design cycle all the same.
//
//   util → kube, cri, config → container → managers → kuberuntime → kubelet → cmd
//
// A lower layer that needs something from a higher one declares a small port (an
// interface) that the higher layer implements; see cri/metrics.ts for the pattern.

/** The layers, lowest first; a folder not named here is a manager. */
const layers = [
  ['util'],
  ['kube', 'cri', 'config'],
  ['container'],
  null, // managers: every other folder of src/
  ['kuberuntime'],
  ['kubelet'],
  ['cmd'],
];

const named = layers.flatMap((l) => l ?? []);
const folder = (names) => `^src/(${names.join('|')})/`;
const managers = `^src/(?!(${named.join('|')})/)[^/]+/`;
const pathOf = (layer) => (layer === null ? managers : folder(layer));

/** For each layer, a rule against importing any layer above it. */
const upward = layers.slice(0, -1).map((layer, i) => {
  const above = layers.slice(i + 1);
  const name = layer === null ? 'managers' : layer.join('-');
  return {
    name: `layer-${name}`,
    comment: `${name} sits below ${above.map((l) => (l === null ? 'the managers' : l.join('/'))).join(', ')}: declare a port instead of importing upward`,
    severity: 'error',
    from: { path: pathOf(layer) },
    to: { path: above.map(pathOf) },
  };
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle (type-only ones included) ties two parts together for good.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...upward,
  ],
  options: {
    includeOnly: '^src/',
    exclude: { path: '^src/(cri|csi|pluginmanager)/gen/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
