/** `genbatch export`: a run's chosen results copied (or hard-linked) into a folder as a data set, with its index. */
export { exportResults, EXPORT_FORMATS } from './export.js';
export type { ExportFormat, ExportOptions, ExportOutcome, ExportWhich } from './export.js';
