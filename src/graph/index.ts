/**
 * Job graphs: `${{ jobs.<id>.<path> }}` references, `needs`, `for_each`.
 * Syntax and checks for the manifest reader, output shapes and values for the
 * runner. Scheduling lives in src/store/graph.ts and src/engine/submit/graph.ts.
 */
export { GraphCollector, findCycles, stripBraces, type ForEach, type GraphResult, type JobLinks } from './collect.js';
export { lrc, type TimedWord } from './lrc.js';
export { CHAT_OUTPUTS, describe, documentedCount, jsonItems, linesOf, outputShape, outputsOf, shapeAt, type Shape } from './outputs.js';
export { inRefField, placeholderInput, restoreRefs } from './placeholders.js';
export { REFS_ONLY_IN_INPUT, fieldSteps, findRefs, hasRef, parseRef, pathText, refText, setField, substitute, valueAt, type FoundRef, type Ref, type Step } from './refs.js';
