// Opens `count` idle TCP connections (sending nothing) to 127.0.0.1:`port`, spread over the local addresses
// 127.0.0.`first` .. 127.0.0.`first + addresses - 1`, then prints how many the server left open once every
// attempt ended and the number open has not changed for 1.5 s ({"opened": N, "open": M}), and holds them
// until killed. Its own process: its file descriptors are not the server's. What the server sends is read
// (and dropped), so a connection it ends is seen closed.
import { connect } from 'node:net';

const [port, count, first, addresses] = process.argv.slice(2).map(Number);
let opened = 0;
let open = 0;
let ended = 0;
const report = () => {
  let last = -1;
  let still = 0;
  const timer = setInterval(() => {
    still = open === last ? still + 1 : 0;
    last = open;
    if (still < 6) return;
    clearInterval(timer);
    process.stdout.write(`${JSON.stringify({ opened, open })}\n`);
  }, 250);
};
for (let i = 0; i < count; i++) {
  const s = connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${first + (i % addresses)}` });
  let up = false;
  const end = () => {
    if (++ended === count) report();
  };
  s.on('connect', () => {
    up = true;
    opened++;
    open++;
    end();
  });
  s.on('error', () => undefined);
  s.resume();
  s.on('close', () => {
    if (up) open--;
    else end();
  });
}
