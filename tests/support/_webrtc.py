"""`/hostile/webrtc`: a page that tries every way WebRTC has of sending packets past a proxy.

For each `host:port` in `targets` (comma-separated; IPv6 in brackets; a name such as
`localhost` is allowed) one peer connection is given the ICE servers `stun:`, `turn:` over
UDP and TCP and `turns:`, and, once it has a remote description, forged remote candidates:
UDP and TCP to the target, and UDP to `<name>-<n>.local`, which only mDNS could resolve
(`name` is a query parameter, so a listener can recognise the query). A WebTransport session is
opened to each target too (HTTP/3, so QUIC over UDP). The page then waits until every peer
connection has finished gathering, or `GATHER_BOUND_MS`, and only then adds `#webrtc-done`:
a crawl that waits for that selector has given the browser every chance to send.
"""

from __future__ import annotations

from _html import script_literal
from _pages import simple_page
from _routes import html
from aiohttp import web

GATHER_BOUND_MS = 5_000
"""Longest the page waits for ICE gathering before it declares itself done."""

MAX_TARGETS = 8
"""Most targets one page accepts."""

MAX_NAME_LENGTH = 40
"""Longest `name` accepted (a DNS label has at most 63 characters)."""

NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
"""Characters allowed in the `name` of the forged `.local` candidates."""

SCRIPT = """<p id="webrtc-status">WebRTC pending</p>
<script>
const targets = %(targets)s;
const mdnsName = %(name)s;
const report = [];
const split = (target) => {
  const cut = target.lastIndexOf(':');
  return [target.slice(0, cut), target.slice(cut + 1)];
};
const gathered = (pc) => new Promise((resolve) => {
  if (pc.iceGatheringState === 'complete') { resolve(); return; }
  pc.addEventListener('icegatheringstatechange', () => {
    if (pc.iceGatheringState === 'complete') resolve();
  });
});
async function attempt(target, index) {
  const [host, port] = split(target);
  const bare = host.replace(/^\\[|\\]$/g, '');
  const pc = new RTCPeerConnection({iceServers: [
    {urls: `stun:${host}:${port}`},
    {urls: [`turn:${host}:${port}?transport=udp`, `turn:${host}:${port}?transport=tcp`,
            `turns:${host}:${port}?transport=tcp`], username: 'crawl', credential: 'stream'},
  ], iceCandidatePoolSize: 1});
  let found = 0;
  pc.addEventListener('icecandidate', (event) => { if (event.candidate) found += 1; });
  pc.createDataChannel('escape');
  const peer = new RTCPeerConnection();
  await pc.setLocalDescription(await pc.createOffer());
  await peer.setRemoteDescription(pc.localDescription);
  await peer.setLocalDescription(await peer.createAnswer());
  await pc.setRemoteDescription(peer.localDescription);
  const forged = [
    `candidate:${index}1 1 udp 2122260223 ${bare} ${port} typ host generation 0`,
    `candidate:${index}2 1 tcp 1518280447 ${bare} ${port} typ host tcptype passive generation 0`,
    `candidate:${index}3 1 udp 2122260223 ${mdnsName}-${index}.local ${port} typ host`,
  ];
  for (const candidate of forged) {
    await pc.addIceCandidate({candidate, sdpMid: '0', sdpMLineIndex: 0})
      .catch((error) => report.push(`${target}: candidate refused (${error.name})`));
  }
  await gathered(pc);
  report.push(`${target}: ${found} local candidates`);
}
function transport(target) {
  try {
    const session = new WebTransport(`https://${target}/`);
    session.ready.catch(() => {});
    session.closed.catch(() => {});
  } catch (error) {
    report.push(`${target}: WebTransport refused (${error.name})`);
  }
}
async function run() {
  const tries = targets.map((target, index) => attempt(target, index + 1).catch(
    (error) => report.push(`${target}: ${error.name}: ${error.message}`)));
  targets.forEach(transport);
  const bound = new Promise((resolve) => setTimeout(resolve, %(bound)d));
  await Promise.race([Promise.all(tries), bound]);
  const done = document.createElement('p');
  done.id = 'webrtc-done';
  done.textContent = report.join('; ') || 'gathering still running';
  document.body.append(done);
}
run();
</script>"""


async def webrtc(request: web.Request) -> web.Response:
    """The page for `?targets=host:port,...`."""
    targets = [part for part in request.query.get("targets", "").split(",") if part]
    if not 0 < len(targets) <= MAX_TARGETS or any(":" not in part for part in targets):
        raise web.HTTPBadRequest(text=f"targets: 1 to {MAX_TARGETS} comma-separated host:port")
    name = request.query.get("name", "crawlstream-probe")
    if not 0 < len(name) <= MAX_NAME_LENGTH or not set(name) <= NAME_CHARS:
        raise web.HTTPBadRequest(text="name: lower-case letters, digits and dashes")
    script = SCRIPT % {
        "targets": script_literal_list(targets),
        "name": script_literal(name),
        "bound": GATHER_BOUND_MS,
    }
    return html(simple_page("WebRTC escape", script))


def script_literal_list(values: list[str]) -> str:
    """A JavaScript array literal of strings that cannot close the `<script>` element."""
    return "[" + ", ".join(script_literal(value) for value in values) + "]"


ROUTES = (web.get("/hostile/webrtc", webrtc),)
"""The WebRTC route."""
