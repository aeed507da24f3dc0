#!/usr/bin/env node
// The operators' dashboard in a real browser (issue 19): Debian's chromium,
// headless, driven by puppeteer-core pointed at the system's browser, so
// nothing is downloaded at run time. Run by the ctest "browser: ..." of
// tests/test_dashboard.cpp against a real fenceqd, which then checks over
// the wire what this script did through the page.
//
//   node dashboard.mjs --url http://127.0.0.1:PORT --user U --password P \
//     --queue Q --job DEAD_JOB_ID --shots PATH_PREFIX
//
// Logs in (HTTP Basic), reads the queue's counts on the overview, opens the
// dead job, retries it (accepting the confirmation), waits until the page
// shows it ready, lists the queue's jobs newest first, saves
// PATH_PREFIX-overview.png and PATH_PREFIX-job.png, and prints one line
// `SEEN {json}` with what the page showed. Exit 0 on success.
import puppeteer from 'puppeteer-core';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
for (const k of ['url', 'user', 'password', 'queue', 'job', 'shots']) {
  if (!args[k]) {
    console.error(`dashboard.mjs: --${k} is required`);
    process.exit(2);
  }
}
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  // Root in CI: chromium's sandbox needs an unprivileged user.
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const seen = {};
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  page.on('dialog', (d) => d.accept());
  // The page redraws itself every few seconds: an element found by one call
  // and clicked by the next may have been replaced in between ("Node is
  // detached"). Found and clicked in one step in the page instead.
  const click = async (selector) => {
    await page.waitForSelector(selector, { timeout: 10000 });
    await page.$eval(selector, (e) => e.click());
  };
  const failures = [];
  page.on('pageerror', (e) => failures.push(String(e)));
  await page.authenticate({ username: args.user, password: args.password });
  await page.goto(`${args.url}/#/`, { waitUntil: 'load' });

  // The overview: the queue's row with its counts.
  const row = `#queues tr[data-queue="${args.queue}"]`;
  await page.waitForSelector(row, { timeout: 10000 });
  const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => td.textContent.trim()));
  [seen.ready, seen.delayed, seen.leased, seen.done, seen.dead] = cells.slice(1, 6);
  // Every queue's name as shown (control and bidi characters escaped).
  seen.queue_names = await page.$$eval('#queues tr[data-queue] td:first-child',
                                       (tds) => tds.map((td) => td.textContent.trim()));
  // Let the chart get a few points before the screenshot.
  await new Promise((r) => setTimeout(r, 4500));
  await page.screenshot({ path: `${args.shots}-overview.png`, fullPage: true });

  // The dead job, from the overview's dead count.
  await click(`${row} td:nth-child(6) a`);
  await page.waitForSelector(`#jobs tr[data-id="${args.job}"]`, { timeout: 10000 });
  await click(`#jobs tr[data-id="${args.job}"] a`);
  await page.waitForFunction(() => document.querySelector('#state')?.textContent === 'dead',
                             { timeout: 10000 });
  seen.state_before = 'dead';
  seen.payload = await page.$eval('#payload', (e) => e.textContent);
  seen.fence = await page.$eval('#fence', (e) => e.textContent);
  await page.screenshot({ path: `${args.shots}-job.png`, fullPage: true });

  // Retry it: confirmed, then the page shows it ready.
  await click('#retry');
  await page.waitForFunction(() => document.querySelector('#state')?.textContent === 'ready',
                             { timeout: 10000 });
  seen.state_after = 'ready';

  // The queue's jobs, newest first (the daemon's order, chosen in the form).
  await page.goto(`${args.url}/#/jobs?queue=${encodeURIComponent(args.queue)}`, { waitUntil: 'load' });
  await page.waitForSelector('#jobs tbody tr[data-id]', { timeout: 10000 });
  await page.select('form.filters select[name="sort"]', 'newest');
  await click('form.filters button[type="submit"]');
  await page.waitForFunction(() => location.hash.includes('sort=newest') &&
                             document.querySelector('#jobs tbody tr[data-id]'), { timeout: 10000 });
  // The page may be drawn again while we read: read it once it settled.
  await new Promise((r) => setTimeout(r, 300));
  seen.newest_first = await page.$$eval('#jobs tbody tr[data-id]', (trs) => trs.map((tr) => tr.dataset.id));
  seen.ages = await page.$$eval('#jobs tbody td.age', (tds) => tds.map((td) => td.textContent.trim()));
  if (failures.length) throw new Error(`errors in the page: ${failures.join('; ')}`);
  console.log(`SEEN ${JSON.stringify(seen)}`);
} catch (e) {
  console.error(`dashboard.mjs: ${e.stack || e}`);
  console.error(`dashboard.mjs: seen so far ${JSON.stringify(seen)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
