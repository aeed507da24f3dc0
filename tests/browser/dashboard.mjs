#!/usr/bin/env node
// The operators' dashboard in a real browser (issue 19): Debian's chromium,
// headless, driven by puppeteer-core pointed at the system's browser, so
// nothing is downloaded at run time. Run by the ctest "browser: ..." of
// tests/test_dashboard.cpp against a real fenceqd, which then checks over
// the wire what this script did through the page.
//
//   node dashboard.mjs --url http://127.0.0.1:PORT --user U --password P \
//     --queue Q --job DEAD_JOB_ID --pause-queue Q2 --child CHILD_ID --shots PATH_PREFIX
//
// First (issue 30), in a browser context of its own, opens the dashboard with
// the login in the URL (http://USER:PASSWORD@127.0.0.1:PORT/), reads the
// queue's counts and pauses --pause-queue from there (a GET and a POST from a
// page whose URL carries credentials). Then logs in (HTTP Basic) in a fresh
// context, reads the queue's counts on the overview, the "updated" time, the
// throughput chart's width against its section's and its points (a first
// visit), the queue's groups waiting and limits (issue 31), opens the dead
// job (and reads its group), retries it (accepting the confirmation), waits
// until the page shows it ready, lists the queue's jobs newest first, opens
// --child's page (a job enqueued with `after`, issue 32) and reads its
// parents with their states, follows the link of a parent not done yet and
// reads that parent's blocked children, follows the child's link back, opens
// the queue's jobs and that parent's page again with the jobs' answer held
// until the parent's page is drawn (the late answer must not draw), saves
// PATH_PREFIX-overview.png, PATH_PREFIX-job.png and PATH_PREFIX-workflow.png,
// and prints one line `SEEN {json}` with what the page showed. Exit 0 on
// success.
import puppeteer from 'puppeteer-core';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
for (const k of ['url', 'user', 'password', 'queue', 'job', 'pause-queue', 'child', 'suspended',
  'shots']) {
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
const failures = [];
// A page in a browser context of its own (no login remembered from another).
const open = async () => {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  page.on('dialog', (d) => d.accept());
  page.on('pageerror', (e) => failures.push(String(e)));
  return page;
};
const row = `#queues tr[data-queue="${args.queue}"]`;
try {
  // The login in the URL: the page's own URL carries credentials, which no
  // request built on it may (fetch refuses them).
  {
    const page = await open();
    const login = new URL(args.url);
    login.username = args.user;
    login.password = args.password;
    login.hash = '#/';
    seen.url_login = {};
    await page.goto(login.href, { waitUntil: 'load' });
    // The document's URL keeps the login (location.href and .origin do not):
    // a URL relative to it has it too.
    seen.url_login.document_url_has_login = await page.evaluate(() => document.URL.includes('@'));
    try {
      await page.waitForSelector(row, { timeout: 10000 });
    } catch (e) {
      const status = await page.$eval('#status', (s) => s.textContent).catch(() => '');
      throw new Error(`no queue data with the login in the URL (status: ${status}): ${e.message}`);
    }
    seen.url_login.ready = await page.$eval(`${row} td:nth-child(2)`, (td) => td.textContent.trim());
    // The page's own style came too (the chart is laid out by dashboard.css).
    seen.url_login.styled = await page.$eval('#chart', (c) => getComputedStyle(c).display === 'block');
    // An action from there too: a POST built the same way.
    const pause = `#queues tr[data-queue="${args['pause-queue']}"]`;
    await page.waitForSelector(`${pause} button`, { timeout: 10000 });
    await page.$$eval(`${pause} button`, (bs) => bs.find((b) => b.textContent === 'pause').click());
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent === 'paused',
                               { timeout: 10000 }, `${pause} td.paused`);
    seen.url_login.paused = true;
    seen.url_login.error = await page.$eval('#status', (s) => s.classList.contains('error'));
    // Each group's limits from their own button: three prompts answered,
    // then the confirmation; the limits cell shows them.
    const answers = ['3', '7', '2'];
    page.removeAllListeners('dialog');
    page.on('dialog', (d) => (d.type() === 'prompt' ? d.accept(answers.shift()) : d.accept()));
    await page.$$eval(`${pause} button`,
                      (bs) => bs.find((b) => b.textContent === 'group limits').click());
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent.includes('per group'),
                               { timeout: 10000 }, `${pause} td:nth-child(12)`);
    seen.url_login.group_limits = await page.$eval(`${pause} td:nth-child(12)`,
                                                   (td) => td.textContent.trim());
    await page.browserContext().close();
  }

  const page = await open();
  // The page redraws itself every few seconds: an element found by one call
  // and clicked by the next may have been replaced in between ("Node is
  // detached"). Found and clicked in one step in the page instead.
  const click = async (selector) => {
    await page.waitForSelector(selector, { timeout: 10000 });
    await page.$eval(selector, (e) => e.click());
  };
  await page.authenticate({ username: args.user, password: args.password });
  await page.goto(`${args.url}/#/`, { waitUntil: 'load' });

  // The overview: the queue's row with its counts.
  await page.waitForSelector(row, { timeout: 10000 });
  // The chart of a first visit: its points (the daemon's history from its
  // start), its width in the page against its section's content, and its
  // canvas's pixels.
  await page.waitForSelector('#chart[data-points]', { timeout: 10000 });
  seen.chart = await page.$eval('#chart', (c) => {
    const box = c.parentElement;
    const cs = getComputedStyle(box);
    return {
      points: Number(c.dataset.points),
      width: c.getBoundingClientRect().width,
      section: box.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight),
      pixels: c.width,
      ratio: window.devicePixelRatio,
    };
  });
  await page.waitForFunction(() => document.querySelector('#status')?.textContent.startsWith('updated'),
                             { timeout: 10000 });
  seen.updated = await page.$eval('#status', (s) => s.textContent);
  const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => td.textContent.trim()));
  [seen.ready, seen.delayed, seen.leased, seen.done, seen.dead] = cells.slice(1, 6);
  seen.groups_waiting = await page.$eval(`${row} td.groups`, (td) => td.textContent.trim());
  seen.limits = cells[11];
  // Blocked jobs (issue 32): none in this queue, the fan-in's child in reports.
  seen.blocked = await page.$eval(`${row} td.blocked`, (td) => td.textContent.trim());
  seen.reports_blocked = await page.$eval('tr[data-queue="reports"] td.blocked',
                                          (td) => td.textContent.trim());
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
  seen.group = await page.$eval('#group', (e) => e.textContent).catch(() => null);
  await page.screenshot({ path: `${args.shots}-job.png`, fullPage: true });

  // Retry it: confirmed, then the page shows it ready.
  await click('#retry');
  await page.waitForFunction(() => document.querySelector('#state')?.textContent === 'ready',
                             { timeout: 10000 });
  seen.state_after = 'ready';

  // The queue's jobs, newest first (the daemon's order, chosen in the form).
  await page.goto(`${args.url}/#/jobs?queue=${encodeURIComponent(args.queue)}`, { waitUntil: 'load' });
  await page.waitForSelector('#jobs tbody tr[data-id]', { timeout: 10000 });
  // Chosen in the page in one step (page.select finds the element, then sets
  // it: a refresh drawing in between left the choice on a form no longer
  // shown, which failed a clean-clone run under load).
  await page.$eval('form.filters select[name="sort"]', (e) => {
    e.value = 'newest';
    e.dispatchEvent(new Event('change', { bubbles: true }));
  });
  // Not submitted yet, and the field left: the page's refresh (every 2 s)
  // draws it again, and must keep the choice.
  await page.$eval('form.filters select[name="sort"]', (e) => e.blur());
  const drawnAt = await page.$eval('#status', (s) => s.textContent);
  await page.waitForFunction((t) => document.querySelector('#status')?.textContent !== t,
                             { timeout: 10000 }, drawnAt);
  seen.sort_kept = await page.$eval('form.filters select[name="sort"]', (e) => e.value);
  await click('form.filters button[type="submit"]');
  await page.waitForFunction(() => location.hash.includes('sort=newest') &&
                             document.querySelector('#jobs tbody tr[data-id]'), { timeout: 10000 });
  // The page may be drawn again while we read: read it once it settled.
  await new Promise((r) => setTimeout(r, 300));
  seen.newest_first = await page.$$eval('#jobs tbody tr[data-id]', (trs) => trs.map((tr) => tr.dataset.id));
  seen.ages = await page.$$eval('#jobs tbody td.age', (tds) => tds.map((td) => td.textContent.trim()));

  // A job that waits for others (issue 32): its parents, each with its
  // state and a link to its page; a parent's page lists the child still
  // blocked, and links back to it.
  const links = (list) => page.$$eval(`#${list} li[data-id]`, (lis) => lis.map((li) => ({
    id: li.dataset.id,
    text: li.querySelector('a').textContent,
    href: li.querySelector('a').getAttribute('href'),
    state: li.querySelector('.state').textContent,
  })));
  await page.goto(`${args.url}/#/job/${encodeURIComponent(args.child)}`, { waitUntil: 'load' });
  await page.waitForSelector('#parents li[data-id]', { timeout: 10000 });
  seen.workflow = { child_state: await page.$eval('#state', (e) => e.textContent) };
  seen.workflow.parents = await links('parents');
  await page.screenshot({ path: `${args.shots}-workflow.png`, fullPage: true });
  const waiting = seen.workflow.parents.find((p) => p.state !== 'done');
  if (!waiting) throw new Error(`no parent of ${args.child} is still to be done`);
  await click(`#parents li[data-id="${waiting.id}"] a`);
  await page.waitForSelector('#blocked-children li[data-id]', { timeout: 10000 });
  seen.workflow.opened = await page.evaluate(() => decodeURIComponent(location.hash));
  seen.workflow.blocked_children = await links('blocked-children');
  seen.workflow.parent_has_parents = (await page.$('#parents')) !== null;
  await click(`#blocked-children li[data-id="${args.child}"] a`);
  await page.waitForFunction((id) => decodeURIComponent(location.hash) === `#/job/${id}` &&
                             document.querySelector('#parents'), { timeout: 10000 }, args.child);
  seen.workflow.back = await page.evaluate(() => decodeURIComponent(location.hash));

  // A suspended job (issue 60): its page shows the suspension, when its
  // wait ends, and its saved steps.
  await page.goto(`${args.url}/#/job/${encodeURIComponent(args.suspended)}`, { waitUntil: 'load' });
  await page.waitForSelector('#suspended', { timeout: 10000 });
  seen.suspended = {
    state: await page.$eval('#state', (e) => e.textContent),
    wait: await page.$eval('#suspended', (e) => e.textContent),
    steps: await page.$$eval('#steps li[data-step]', (lis) => lis.map((li) => li.textContent)),
  };
  await page.screenshot({ path: `${args.shots}-suspended.png`, fullPage: true });

  // An answer that comes late for a page already left: the queue's jobs are
  // asked for and held back, a parent's page (one not shown before: its list
  // of blocked children tells it is drawn) opened meanwhile, then the jobs'
  // answer let through; the parent's page must stay (the jobs' page, drawn
  // last, would replace it).
  await page.setRequestInterception(true);
  let release = null;
  const held = new Promise((resolve) => {
    page.on('request', (req) => {
      if (req.isInterceptResolutionHandled()) return;
      if (!release && req.url().includes('/api/jobs?')) {
        release = () => req.continue();
        resolve();
      } else {
        req.continue();
      }
    });
  });
  await page.evaluate((q) => { location.hash = `#/jobs?queue=${encodeURIComponent(q)}`; }, args.queue);
  await held;
  await page.evaluate((id) => { location.hash = `#/job/${encodeURIComponent(id)}`; }, waiting.id);
  await page.waitForSelector('#blocked-children li[data-id]', { timeout: 10000 });
  const late = page.waitForResponse((r) => r.url().includes('/api/jobs?'), { timeout: 10000 });
  release();
  await late;
  // The late answer's body read and its draw (if any) done: a few of the
  // page's own turns later.
  await page.evaluate(() => new Promise((r) => setTimeout(r, 500)));
  seen.late_answer = {
    hash: await page.evaluate(() => decodeURIComponent(location.hash)),
    blocked_children: (await page.$('#blocked-children')) !== null,
    jobs_table: (await page.$('#jobs')) !== null,
  };
  if (failures.length) throw new Error(`errors in the page: ${failures.join('; ')}`);
  console.log(`SEEN ${JSON.stringify(seen)}`);
} catch (e) {
  console.error(`dashboard.mjs: ${e.stack || e}`);
  console.error(`dashboard.mjs: seen so far ${JSON.stringify(seen)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
