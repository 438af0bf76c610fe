// The official JavaScript SDK, as its README shows it, against the gateway in GATEWAY_URL:
// scrape, crawl (its waiter), startCrawl + getCrawlStatus (pages through `next`), batch,
// map. Prints one JSON line of what came back; the Python test asserts on it.
import Firecrawl from "@mendable/firecrawl-js";

const app = new Firecrawl({ apiKey: "fc-test", apiUrl: process.env.GATEWAY_URL });
const site = process.env.SITE_URL;
const sources = (docs) => docs.map((doc) => doc.metadata?.sourceURL);

const doc = await app.scrape(`${site}page/3`, {
  formats: ["markdown", "html", "links"],
  onlyMainContent: false, // the title is in the page's <header>
});
const crawled = await app.crawl(site, {
  limit: 8, includePaths: ["^/page/"], pollInterval: 1, timeout: 120,
});
const started = await app.startCrawl(site, { limit: 105, includePaths: ["^/page/"] });
let status = await app.getCrawlStatus(started.id);
const deadline = Date.now() + 180_000;
while (status.status === "scraping" && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  status = await app.getCrawlStatus(started.id);
}
const batch = await app.batchScrape([`${site}page/1`, `${site}page/2`], {
  options: { formats: ["markdown"] }, pollInterval: 1, timeout: 120,
});
const mapped = await app.map(site);

console.log(JSON.stringify({
  scrape: { markdown: doc.markdown, html: doc.html, links: doc.links, status: doc.metadata?.statusCode },
  crawl: { status: crawled.status, sources: sources(crawled.data) },
  paged: { status: status.status, completed: status.completed, sources: sources(status.data) },
  batch: { status: batch.status, sources: sources(batch.data) },
  map: mapped.links.map((link) => link.url),
}));
