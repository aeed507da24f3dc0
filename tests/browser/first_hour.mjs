#!/usr/bin/env node
// The dashboard as a new user first opens it (tests/first_hour.sh, issue 30):
// Debian's chromium, headless, driven by puppeteer-core, the login in the URL
// (http://USER:PASSWORD@127.0.0.1:PORT/), against the daemon `make run`
// serves after the READMEs' blocks ran on it.
//
//   node first_hour.mjs --url http://USER:PASSWORD@127.0.0.1:PORT/ --queue Q
//
// Passes when the overview shows queue Q's row with at least one done job (a
// README block worked it), the status line says "updated", every /api/ answer
// was a 2xx, and the page logged no error and threw nothing (a fetch built from
// a URL with credentials throws, and the page stays blank). Prints one line
// `SEEN {json}` with what the page showed. Exit 0 on success.
import puppeteer from 'puppeteer-core';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
for (const k of ['url', 'queue']) {
  if (!args[k]) {
    console.error(`first_hour.mjs: --${k} is required`);
    process.exit(2);
  }
}
const wait = Number(args.timeout || 30) * 1000;   // per step; generous on a busy machine

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // Root in CI: chromium's sandbox needs an unprivileged user.
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const seen = { api: [] };
const failures = [];
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  page.on('pageerror', (e) => failures.push(`page error: ${e}`));
  // Chromium asks for /favicon.ico by itself, which the dashboard does not
  // serve: that 404 is the browser's, not the page's.
  const own = (url) => !url || new URL(url).pathname !== '/favicon.ico';
  page.on('console', (m) => {
    if (m.type() === 'error' && own(m.location()?.url)) {
      failures.push(`console error: ${m.text()} (${m.location()?.url || 'no URL'})`);
    }
  });
  page.on('requestfailed', (r) => {
    if (own(r.url())) failures.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => {
    const path = new URL(r.url()).pathname;
    if (!path.startsWith('/api/')) return;
    seen.api.push(`${r.request().method()} ${path} ${r.status()}`);
    if (r.status() < 200 || r.status() > 299) failures.push(`${path} answered ${r.status()}`);
  });
  await page.goto(args.url, { waitUntil: 'load', timeout: wait });
  const row = `#queues tr[data-queue="${args.queue}"]`;
  try {
    await page.waitForSelector(row, { timeout: wait });
  } catch (e) {
    const status = await page.$eval('#status', (s) => s.textContent).catch(() => '(no #status)');
    throw new Error(`no row for queue ${args.queue} (status: ${status}): ${e.message}`);
  }
  await page.waitForFunction(() => document.querySelector('#status')?.textContent.startsWith('updated'),
                             { timeout: wait });
  seen.status = await page.$eval('#status', (s) => s.textContent);
  seen.status_error = await page.$eval('#status', (s) => s.classList.contains('error'));
  const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => td.textContent.trim()));
  [seen.queue, seen.ready, seen.delayed, seen.leased, seen.done, seen.dead] = cells.slice(0, 6);
  seen.queues = await page.$$eval('#queues tr[data-queue]', (trs) => trs.map((tr) => tr.dataset.queue));
  if (!(Number(seen.done) >= 1)) failures.push(`queue ${args.queue} shows done ${JSON.stringify(seen.done)}, not >= 1`);
  if (seen.status_error) failures.push(`the status line is an error: ${seen.status}`);
  if (!seen.api.some((a) => a.startsWith('GET '))) failures.push('the page made no GET /api/ request');
  if (failures.length) throw new Error(failures.join('; '));
  console.log(`SEEN ${JSON.stringify(seen)}`);
} catch (e) {
  console.error(`first_hour.mjs: ${e.stack || e}`);
  console.error(`first_hour.mjs: seen so far ${JSON.stringify(seen)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
