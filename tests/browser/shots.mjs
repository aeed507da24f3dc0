#!/usr/bin/env node
// Screenshots of the dashboard for docs/dashboard.md and the README (scripts/dashboard_shots.sh):
// the overview after `--wait` seconds (so its chart has points), a queue's
// jobs newest first, and one job's page. Reads only; Debian's chromium, headless, through puppeteer-core.
//
//   node shots.mjs --url http://127.0.0.1:PORT --user U --password P \
//     --job ID --wait SECONDS --out PATH_PREFIX
// (the job page shows a job leased at that moment, if any, else ID)
import puppeteer from 'puppeteer-core';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 760 });
  await page.authenticate({ username: args.user, password: args.password });
  await page.goto(`${args.url}/#/`, { waitUntil: 'load' });
  await page.waitForSelector('#queues tr[data-queue]', { timeout: 10000 });
  await new Promise((r) => setTimeout(r, Number(args.wait || 20) * 1000));
  await page.screenshot({ path: `${args.out}-overview.png` });
  // The emails queue's jobs, newest first (the daemon's order, across pages).
  await page.goto(`${args.url}/#/jobs?queue=emails&sort=newest`, { waitUntil: 'load' });
  await page.waitForSelector('#jobs tbody tr[data-id]', { timeout: 10000 });
  await new Promise((r) => setTimeout(r, 500));
  await page.screenshot({ path: `${args.out}-jobs.png` });
  // A job leased right now, when one is (a countdown, an owner), else --job.
  const leased = await page.evaluate(async () => {
    const r = await fetch('/api/jobs?state=leased&limit=1');
    const body = await r.json();
    return body.ok && body.result.jobs.length ? body.result.jobs[0].id : null;
  });
  const job = leased || args.job;
  await page.goto(`${args.url}/#/job/${encodeURIComponent(job)}`, { waitUntil: 'load' });
  await page.waitForSelector('#detail', { timeout: 10000 });
  await new Promise((r) => setTimeout(r, 500));
  await page.screenshot({ path: `${args.out}-job.png` });
} finally {
  await browser.close();
}
