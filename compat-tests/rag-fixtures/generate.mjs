// Generates reference chunking fixtures from Mastra's @mastra/rag.
//
//   cd compat-tests/rag-fixtures && npm ci && ../node_modules/node/bin/node generate.mjs
//
// Reads the source documents from crates/kestrel-rag/tests/fixtures/documents/ and writes
// one JSON file per strategy to crates/kestrel-rag/tests/fixtures/chunking/. Output is
// deterministic: no timestamps, no random ids (chunk ids are not recorded), stable key order.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { MDocument } from '@mastra/rag';

const here = dirname(fileURLToPath(import.meta.url));
const fixtures = join(here, '..', '..', 'crates', 'kestrel-rag', 'tests', 'fixtures');
const docsDir = join(fixtures, 'documents');
const outDir = join(fixtures, 'chunking');

const require = createRequire(import.meta.url);
const mastraRagVersion = JSON.parse(
  readFileSync(require.resolve('@mastra/rag/package.json'), 'utf8'),
).version;

const FROM = {
  text: (t, m) => MDocument.fromText(t, m),
  markdown: (t, m) => MDocument.fromMarkdown(t, m),
  html: (t, m) => MDocument.fromHTML(t, m),
  json: (t, m) => MDocument.fromJSON(t, m),
};

const doc = (file) => readFileSync(join(docsDir, file), 'utf8');
const ESSAY = { docType: 'text', inputFile: 'essay.txt', metadata: { source: 'essay.txt', lang: 'en' } };
const GUIDE = { docType: 'markdown', inputFile: 'guide.md', metadata: { source: 'guide.md', lang: 'en' } };
const PAGE = { docType: 'html', inputFile: 'page.html', metadata: { source: 'page.html', lang: 'en' } };
const SOCIETY = { docType: 'json', inputFile: 'society.json', metadata: { source: 'society.json' } };
const NOTES = { docType: 'text', inputFile: 'notes.tex', metadata: { source: 'notes.tex', kind: 'latex' } };
const inline = (docType, input, metadata = {}) => ({ docType, inputFile: null, input, metadata });

const MD_HEADERS = [['#', 'Header 1'], ['##', 'Header 2'], ['###', 'Header 3'], ['####', 'Header 4']];
const HTML_HEADERS = [['h1', 'Header 1'], ['h2', 'Header 2'], ['h3', 'Header 3']];

// Each case: name, a document (ESSAY, ... or inline(...)), and the exact object passed to chunk().
// Small inputs swept over sizes and overlaps: every boundary of the merge (a piece exactly
// maxSize, an overlap that must shrink for the next piece, a two-character separator).
const SWEEP_TEXTS = [
  ['words', 'aa bbb c dddd ee fffff g hh iii jjjj k llllll m', [' ']],
  ['sentences', 'One. Two three. Four five six. Seven. Eight nine ten eleven. Twelve.', ['. ', ' ']],
  ['unicode', 'é 野鳥 🐦🐦 kestrel 翠鳥の会 ab 🦀 xyz', [' ', '']],
];
function sweep() {
  const cases = [];
  for (const [label, text, separators] of SWEEP_TEXTS) {
    for (const maxSize of [4, 5, 6, 7, 9, 12, 16]) {
      for (const overlap of [0, 1, 2, 3, 5, 8]) {
        if (overlap >= maxSize) continue;
        cases.push([`sweep-${label}-max${maxSize}-overlap${overlap}`, inline('text', text, { source: 'sweep' }),
          { strategy: 'recursive', maxSize, overlap, separators }]);
      }
    }
  }
  return cases;
}

// Small Markdown documents for the headers mode's edge cases.
const MD_EDGES = [
  ['fences-and-inline-ticks', '# Top\nIntro with ```inline``` ticks.\n```rust\n# not a header\nfn main() {}\n```\n## Sub\nAfter the fence.\n~~~\n## still code\n~~~\nTail line.'],
  ['deeper-then-shallower', '# A\n## B\n### C\nText under C.\n## D\nText under D.\n# E\nText under E.'],
  ['header-right-after-header', '# One\n## Two\n## Three\nBody three.\n#### Five\nBody five.'],
  ['no-space-and-hash-only', '#NoSpace line\n#\nBody after bare hash.\n## Real\nBody.'],
  ['tables-and-blanks', '# Data\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nAfter table.\n\n\n## More\n\nLast.'],
  ['ticks-at-line-start', '# Top\n```js``` is not a fence here.\n## Next\nBody.\n````\n## in a four-tick fence\n````\nEnd.'],
  ['indented-headers', '  # Indented\nText.\n   ## Also\nMore text.'],
];
function mdEdges() {
  const cases = [];
  for (const [label, text] of MD_EDGES) {
    for (const [mode, extra] of [['strip', {}], ['keep', { stripHeaders: false }], ['lines', { returnEachLine: true }], ['lines-keep', { returnEachLine: true, stripHeaders: false }]]) {
      cases.push([`edge-${label}-${mode}`, inline('markdown', text, { source: 'edge' }),
        { strategy: 'markdown', headers: MD_HEADERS, ...extra }]);
    }
  }
  return cases;
}

const GROUPS = {
  recursive: [
    ['defaults', ESSAY, { strategy: 'recursive' }],
    ['max300-overlap0', ESSAY, { strategy: 'recursive', maxSize: 300, overlap: 0 }],
    ['max300-overlap50', ESSAY, { strategy: 'recursive', maxSize: 300, overlap: 50 }],
    ['max1000-overlap200', ESSAY, { strategy: 'recursive', maxSize: 1000, overlap: 200 }],
    ['max100-default-overlap-error', ESSAY, { strategy: 'recursive', maxSize: 100 }],
    ['bug-24128-repro-large-overlap', inline('text', 'aaaa bbbb cccc dddd eeee'),
      { strategy: 'recursive', maxSize: 12, overlap: 8, separators: [' '] }],
    ['bug-24128-essay-max200-overlap150', ESSAY, { strategy: 'recursive', maxSize: 200, overlap: 150 }],
    ['markdown-text-max120-overlap20', GUIDE, { strategy: 'recursive', maxSize: 120, overlap: 20 }],
    ['separators-sentence-space', ESSAY,
      { strategy: 'recursive', maxSize: 200, overlap: 0, separators: ['. ', ' '] }],
    ['separators-regex', ESSAY,
      { strategy: 'recursive', maxSize: 200, overlap: 30, separators: ['[.!?]\\s+', '\\s+'], isSeparatorRegex: true }],
    ['separator-position-start', ESSAY,
      { strategy: 'recursive', maxSize: 200, overlap: 0, separators: ['. ', ' '], separatorPosition: 'start' }],
    ['separator-position-end', ESSAY,
      { strategy: 'recursive', maxSize: 200, overlap: 0, separators: ['. ', ' '], separatorPosition: 'end' }],
    ['keepSeparator-not-supported-error', ESSAY,
      { strategy: 'recursive', maxSize: 200, overlap: 0, keepSeparator: 'end' }],
    ['add-start-index', ESSAY, { strategy: 'recursive', maxSize: 300, overlap: 50, addStartIndex: true }],
    ['strip-whitespace-false-separator-end', ESSAY,
      { strategy: 'recursive', maxSize: 200, overlap: 0, separators: ['. ', ' '], separatorPosition: 'end', stripWhitespace: false }],
    ['language-markdown', GUIDE, { strategy: 'recursive', maxSize: 300, overlap: 0, language: 'markdown' }],
    ...sweep(),
  ],
  character: [
    ['defaults', ESSAY, { strategy: 'character' }],
    ['max300-overlap0', ESSAY, { strategy: 'character', maxSize: 300, overlap: 0 }],
    ['max300-overlap50', ESSAY, { strategy: 'character', maxSize: 300, overlap: 50 }],
    ['max100-default-overlap-error', ESSAY, { strategy: 'character', maxSize: 100 }],
    ['separator-newline', ESSAY, { strategy: 'character', separator: '\n', maxSize: 500, overlap: 0 }],
    ['separator-sentence', ESSAY, { strategy: 'character', separator: '. ', maxSize: 400, overlap: 0 }],
    ['separator-regex', ESSAY,
      { strategy: 'character', separator: '[.!?]\\s+', isSeparatorRegex: true, maxSize: 400, overlap: 0 }],
    ['separator-position-start', ESSAY,
      { strategy: 'character', separator: '. ', separatorPosition: 'start', maxSize: 400, overlap: 0 }],
    ['separator-position-end', ESSAY,
      { strategy: 'character', separator: '. ', separatorPosition: 'end', maxSize: 400, overlap: 0 }],
    ['large-overlap-unicode', inline('text',
      'Zoë counted 翠鳥 kingfishers 🐦 by the sluice, then teal, wigeon and pintail; the café owner 🐦 brought coffee at dawn.',
      { source: 'inline' }),
      { strategy: 'character', maxSize: 30, overlap: 20 }],
    ['add-start-index', ESSAY, { strategy: 'character', maxSize: 300, overlap: 50, addStartIndex: true }],
  ],
  token: [
    ['defaults', ESSAY, { strategy: 'token' }],
    ['max100-overlap0', ESSAY, { strategy: 'token', maxSize: 100, overlap: 0 }],
    ['max100-overlap20', ESSAY, { strategy: 'token', maxSize: 100, overlap: 20 }],
    ['max50-overlap40-large', ESSAY, { strategy: 'token', maxSize: 50, overlap: 40 }],
    ['max100-default-overlap-error', ESSAY, { strategy: 'token', maxSize: 100 }],
    ['encoding-o200k', ESSAY, { strategy: 'token', encodingName: 'o200k_base', maxSize: 100, overlap: 10 }],
    ['model-gpt-4o', ESSAY, { strategy: 'token', modelName: 'gpt-4o', maxSize: 100, overlap: 10 }],
    ['strip-whitespace-false-max37', ESSAY, { strategy: 'token', maxSize: 37, overlap: 0, stripWhitespace: false }],
    ['add-start-index', ESSAY, { strategy: 'token', maxSize: 100, overlap: 20, addStartIndex: true }],
    ['max5-overlap1-splits-multibyte', inline('text', 'The card reads 野鳥の会 beside a kingfisher (翠鳥) 🐦!', { source: 'inline' }),
      { strategy: 'token', maxSize: 5, overlap: 1 }],
    ['special-token-disallowed-error', inline('text', 'Kestrel agents stop at <|endoftext|> and never read past it.'),
      { strategy: 'token', maxSize: 8, overlap: 0 }],
    ['special-token-allowed-all', inline('text', 'Kestrel agents stop at <|endoftext|> and never read past it.'),
      { strategy: 'token', maxSize: 8, overlap: 0, allowedSpecial: 'all' }],
  ],
  markdown: [
    ...mdEdges(),
    ['defaults', GUIDE, { strategy: 'markdown' }],
    ['max300-overlap0', GUIDE, { strategy: 'markdown', maxSize: 300, overlap: 0 }],
    ['max300-overlap50', GUIDE, { strategy: 'markdown', maxSize: 300, overlap: 50 }],
    ['max120-overlap20', GUIDE, { strategy: 'markdown', maxSize: 120, overlap: 20 }],
    ['max100-default-overlap-error', GUIDE, { strategy: 'markdown', maxSize: 100 }],
    ['headers-strip-default', GUIDE, { strategy: 'markdown', headers: MD_HEADERS }],
    ['headers-strip-false', GUIDE, { strategy: 'markdown', headers: MD_HEADERS, stripHeaders: false }],
    ['headers-h1-h2-only', GUIDE, { strategy: 'markdown', headers: [['#', 'h1'], ['##', 'h2']], stripHeaders: true }],
    ['headers-return-each-line', GUIDE, { strategy: 'markdown', headers: MD_HEADERS, returnEachLine: true }],
    ['headers-with-maxSize-ignored', GUIDE, { strategy: 'markdown', headers: MD_HEADERS, maxSize: 100, overlap: 0 }],
  ],
  html: [
    ['no-headers-or-sections-error', PAGE, { strategy: 'html' }],
    ['headers-h1-h3', PAGE, { strategy: 'html', headers: HTML_HEADERS }],
    ['headers-h2-only', PAGE, { strategy: 'html', headers: [['h2', 'Section']] }],
    ['headers-return-each-line', PAGE, { strategy: 'html', headers: HTML_HEADERS, returnEachLine: true }],
    ['headers-max100-overlap0', PAGE, { strategy: 'html', headers: HTML_HEADERS, maxSize: 100, overlap: 0 }],
    ['headers-max100-default-overlap-error', PAGE, { strategy: 'html', headers: HTML_HEADERS, maxSize: 100 }],
    ['sections-h1-h2', PAGE, { strategy: 'html', sections: [['h1', 'Header 1'], ['h2', 'Header 2']] }],
    ['sections-h1-h3', PAGE, { strategy: 'html', sections: HTML_HEADERS }],
    ['sections-h1-h3-max120-overlap20', PAGE, { strategy: 'html', sections: HTML_HEADERS, maxSize: 120, overlap: 20 }],
  ],
  json: [
    ['no-maxSize-error', SOCIETY, { strategy: 'json' }],
    ['max2000', SOCIETY, { strategy: 'json', maxSize: 2000 }],
    ['max300', SOCIETY, { strategy: 'json', maxSize: 300 }],
    ['max300-min50', SOCIETY, { strategy: 'json', maxSize: 300, minSize: 50 }],
    ['max150-min30', SOCIETY, { strategy: 'json', maxSize: 150, minSize: 30 }],
    ['max100-default-overlap', SOCIETY, { strategy: 'json', maxSize: 100 }],
    ['max300-ensureAscii-false', SOCIETY, { strategy: 'json', maxSize: 300, ensureAscii: false }],
    ['max300-convertLists', SOCIETY, { strategy: 'json', maxSize: 300, convertLists: true }],
    ['max500-convertLists-ensureAscii-false', SOCIETY,
      { strategy: 'json', maxSize: 500, convertLists: true, ensureAscii: false }],
  ],
  latex: [
    ['defaults', NOTES, { strategy: 'latex' }],
    ['max300-overlap0', NOTES, { strategy: 'latex', maxSize: 300, overlap: 0 }],
    ['max200-overlap50', NOTES, { strategy: 'latex', maxSize: 200, overlap: 50 }],
    ['max120-overlap100-large', NOTES, { strategy: 'latex', maxSize: 120, overlap: 100 }],
    ['max100-default-overlap-error', NOTES, { strategy: 'latex', maxSize: 100 }],
    ['separator-position-start', NOTES, { strategy: 'latex', maxSize: 300, overlap: 0, separatorPosition: 'start' }],
    ['separator-position-end', NOTES, { strategy: 'latex', maxSize: 300, overlap: 0, separatorPosition: 'end' }],
  ],
  sentence: [
    ['no-maxSize-error', ESSAY, { strategy: 'sentence' }],
    ['max300', ESSAY, { strategy: 'sentence', maxSize: 300 }],
    ['max300-overlap100', ESSAY, { strategy: 'sentence', maxSize: 300, overlap: 100 }],
    ['max500-min100-target400', ESSAY, { strategy: 'sentence', maxSize: 500, minSize: 100, targetSize: 400 }],
    ['max200-overlap150-large', ESSAY, { strategy: 'sentence', maxSize: 200, overlap: 150 }],
    ['max100-no-overlap-given', ESSAY, { strategy: 'sentence', maxSize: 100 }],
    ['sentence-enders-period-only', ESSAY, { strategy: 'sentence', maxSize: 300, sentenceEnders: ['.'] }],
    ['max60-fallback-words', ESSAY, { strategy: 'sentence', maxSize: 60 }],
    ['max60-fallback-characters-only', ESSAY,
      { strategy: 'sentence', maxSize: 60, fallbackToWords: false, fallbackToCharacters: true }],
    ['max60-no-fallbacks', ESSAY,
      { strategy: 'sentence', maxSize: 60, fallbackToWords: false, fallbackToCharacters: false }],
  ],
  'semantic-markdown': [
    ['defaults', GUIDE, { strategy: 'semantic-markdown' }],
    ['join-threshold-50', GUIDE, { strategy: 'semantic-markdown', joinThreshold: 50 }],
    ['join-threshold-150', GUIDE, { strategy: 'semantic-markdown', joinThreshold: 150 }],
    ['join-threshold-2000', GUIDE, { strategy: 'semantic-markdown', joinThreshold: 2000 }],
    ['encoding-o200k-threshold-100', GUIDE,
      { strategy: 'semantic-markdown', encodingName: 'o200k_base', joinThreshold: 100 }],
    ['max50-overlap0-maxSize-ignored', GUIDE, { strategy: 'semantic-markdown', maxSize: 50, overlap: 0 }],
    ['max100-default-overlap-error', GUIDE, { strategy: 'semantic-markdown', maxSize: 100 }],
  ],
};

// Capture console.warn (Mastra warns about oversized chunks / disabled fallbacks).
let warnings = null;
const realWarn = console.warn;
console.warn = (...args) => {
  if (warnings) warnings.push(args.map(String).join(' '));
  else realWarn(...args);
};

// Plain JSON copy; chunk() receives its own deep copy so Mastra cannot mutate what we record.
const clone = (v) => JSON.parse(JSON.stringify(v));

async function runCase([name, source, options]) {
  const input = source.input ?? doc(source.inputFile);
  const record = {
    name,
    docType: source.docType,
    inputFile: source.inputFile,
    input,
    metadata: clone(source.metadata),
    options: clone(options),
  };
  warnings = [];
  try {
    const mdoc = FROM[source.docType](input, clone(source.metadata));
    const chunks = await mdoc.chunk(clone(options));
    record.chunks = chunks.map((c) => ({ text: c.text, metadata: clone(c.metadata) }));
  } catch (err) {
    record.error = err instanceof Error ? err.message : String(err);
  } finally {
    if (warnings.length) record.warnings = warnings;
    warnings = null;
  }
  return record;
}

mkdirSync(outDir, { recursive: true });
for (const [strategy, cases] of Object.entries(GROUPS)) {
  const out = { mastraRag: mastraRagVersion, strategy, cases: [] };
  for (const c of cases) out.cases.push(await runCase(c));
  writeFileSync(join(outDir, `${strategy}.json`), JSON.stringify(out, null, 2) + '\n');
  const summary = out.cases.map((c) => `${c.name}=${c.error ? 'error' : c.chunks.length}`).join(', ');
  console.log(`${strategy}.json: ${out.cases.length} cases (${summary})`);
}
