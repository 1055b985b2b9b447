/** `genbatch view`: a local web app over the state file and output folder (src/view/README.md). */
export { startView, type View, type ViewOptions } from './server.js';
export { TOKEN_HEADER } from './guard.js';
