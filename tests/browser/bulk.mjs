#!/usr/bin/env node
// The dashboard's bulk actions (issue 33) in a real browser: Debian's
// chromium, headless, driven by puppeteer-core as dashboard.mjs does. Run by
// the ctest "browser: retry all ..." of tests/test_dashboard.cpp against a
// real fenceqd, which then checks over the wire what this script did.
//
//   node bulk.mjs --url http://127.0.0.1:PORT --user U --password P \
//     --dead-queue Q --pick-queue Q2 --pick ID1,ID2,ID3 --shots PATH_PREFIX
//
// Logs in (HTTP Basic), reads --dead-queue's "retry all N dead" button on the
// overview, presses it (the confirmation's text kept, then accepted), waits
// until the row shows no dead job and the notice says how many were retried.
// Then lists --pick-queue's jobs, checks the boxes of the --pick ids, waits
// for the page to draw itself again (the selection stays), presses "cancel
// selected" (its confirmation kept and accepted), waits until those rows
// show cancelled; then checks every box with the select-all box and presses
// "retry selected" (only the cancelled ones change). Saves
// PATH_PREFIX-bulk.png and prints one line `SEEN {json}`. Exit 0 on success.
import puppeteer from 'puppeteer-core';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
for (const k of ['url', 'user', 'password', 'dead-queue', 'pick-queue', 'pick', 'shots']) {
  if (!args[k]) {
    console.error(`bulk.mjs: --${k} is required`);
    process.exit(2);
  }
}
const picks = args.pick.split(',');
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // Root in CI: chromium's sandbox needs an unprivileged user.
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const seen = { dialogs: [] };
const failures = [];
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  // Every confirmation's text kept, then accepted.
  page.on('dialog', (d) => { seen.dialogs.push({ type: d.type(), message: d.message() }); d.accept(); });
  page.on('pageerror', (e) => failures.push(String(e)));
  // The page draws itself again every 2 s: found and clicked in one step.
  const click = async (selector) => {
    await page.waitForSelector(selector, { timeout: 10000 });
    await page.$eval(selector, (e) => e.click());
  };
  const text = (selector) => page.$eval(selector, (e) => e.textContent.trim());
  const until = (fn, ...more) => page.waitForFunction(fn, { timeout: 15000 }, ...more);
  await page.authenticate({ username: args.user, password: args.password });
  await page.goto(`${args.url}/#/`, { waitUntil: 'load' });

  // The overview: the dead queue's retry-all button, labelled with its count.
  const row = `#queues tr[data-queue="${args['dead-queue']}"]`;
  const retryAll = `${row} button.retry-all[data-state="dead"]`;
  await page.waitForSelector(retryAll, { timeout: 10000 });
  seen.dead_before = await text(`${row} td:nth-child(6)`);
  seen.retry_all_label = await text(retryAll);
  seen.retry_all_buttons = await page.$$eval(`${row} button.retry-all`,
                                             (bs) => bs.map((b) => b.textContent));
  await click(retryAll);
  await until(() => document.querySelector('#notice')?.textContent.startsWith('Retried'));
  seen.retry_all_notice = await text('#notice');
  await until((sel) => document.querySelector(sel)?.textContent.trim() === '0',
              `${row} td:nth-child(6)`);
  seen.dead_after = await text(`${row} td:nth-child(6)`);
  seen.ready_after = await text(`${row} td:nth-child(2)`);
  seen.retry_all_left = (await page.$(retryAll)) !== null;

  // A page of jobs: three boxes checked, kept while the page draws itself again.
  await page.goto(`${args.url}/#/jobs?queue=${encodeURIComponent(args['pick-queue'])}`,
                  { waitUntil: 'load' });
  await page.waitForSelector('#jobs tbody tr[data-id]', { timeout: 10000 });
  seen.buttons_before = await page.$$eval('.selection button', (bs) => bs.map((b) => b.disabled));
  for (const id of picks) await click(`#jobs tr[data-id="${id}"] input.pick`);
  seen.count_shown = await text('#selected-count');
  await new Promise((r) => setTimeout(r, 2600));  // a redraw (every 2 s) in between
  seen.checked_after_redraw = await page.$$eval('#jobs tbody input.pick:checked',
                                                (bs) => bs.map((b) => b.dataset.id));
  seen.select_all_indeterminate = await page.$eval('#select-all', (b) => b.indeterminate);
  await page.screenshot({ path: `${args.shots}-bulk.png`, fullPage: true });
  const dialogs = seen.dialogs.length;
  await click('#cancel-selected');
  await until(() => document.querySelector('#notice')?.textContent.startsWith('Cancelled'));
  seen.cancel_dialog = seen.dialogs[dialogs]?.message;
  seen.cancel_notice = await text('#notice');
  await until((ids) => ids.every((id) => document.querySelector(
    `#jobs tr[data-id="${id}"] td.state-cancelled`)), picks);
  seen.states = await page.$$eval('#jobs tbody tr[data-id]', (trs) => Object.fromEntries(
    trs.map((tr) => [tr.dataset.id, tr.querySelector('td[class^="state-"]').textContent])));
  seen.checked_after_cancel = await page.$$eval('#jobs tbody input.pick:checked', (bs) => bs.length);

  // Every box by the select-all box, then retry: the cancelled ones come back.
  await click('#select-all');
  seen.count_all = await text('#selected-count');
  await click('#retry-selected');
  await until(() => document.querySelector('#notice')?.textContent.startsWith('Retried'));
  seen.retry_dialog = seen.dialogs[dialogs + 1]?.message;
  seen.retry_notice = await text('#notice');
  await until(() => !document.querySelector('#jobs td.state-cancelled'));
  if (failures.length) throw new Error(`errors in the page: ${failures.join('; ')}`);
  console.log(`SEEN ${JSON.stringify(seen)}`);
} catch (e) {
  console.error(`bulk.mjs: ${e.stack || e}`);
  console.error(`bulk.mjs: seen so far ${JSON.stringify(seen)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
