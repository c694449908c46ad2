// SPDX-License-Identifier: Apache-2.0
// coord_web in headless Chromium (puppeteer-core): two instances on one
// store, A and B, and an attacker's pages on other origins. Run by
// tests/examples/web_session_test.sh, which starts everything and passes:
//   PUPPETEER_DIR  where puppeteer-core is installed (node_modules inside)
//   CHROMIUM       the browser binary
//   A, B           the instances' base URLs (http://127.0.0.1:PORT)
//   EVIL_PORT      a free port for the attacker's pages
//   IDLE_SECONDS   the instances' idle timeout
//   OUT            where the screenshot goes
// Every check names what failed; the exit status is the number of failures.
'use strict';
const path = require('path');
const http = require('http');
const puppeteer = require(path.join(process.env.PUPPETEER_DIR, 'node_modules', 'puppeteer-core'));

const A = process.env.A, B = process.env.B;
const evilPort = Number(process.env.EVIL_PORT);
const idleSeconds = Number(process.env.IDLE_SECONDS);
const cookieName = '__Host-sid';
let failures = 0;
function check(ok, what) {
  if (ok) console.log(`ok: ${what}`);
  else { failures++; console.log(`FAIL: ${what}`); }
}

// The attacker's site: a page whose form posts to A's /logout-all on load.
// Served on localhost (another site than 127.0.0.1: SameSite applies) and on
// 127.0.0.1 at another port (the same site, another origin: Origin applies).
function evilServer(host) {
  const server = http.createServer((req, res) => {
    res.writeHead(200, {'Content-Type': 'text/html'});
    // /login: login CSRF (the victim signed in to the attacker's account).
    const form = req.url === '/login'
      ? `<form id="f" method="post" action="${A}/login"><input name="user" value="bob"><input name="password" value="builder"></form>`
      : `<form id="f" method="post" action="${A}/logout-all"><input name="csrf" value="guessed"></form>`;
    res.end(`<!doctype html>${form}<script>document.getElementById('f').submit()</script>`);
  });
  return new Promise((resolve) => server.listen(evilPort + (host === 'localhost' ? 0 : 1), host, () => resolve(server)));
}

async function signIn(page, base, user, password) {
  await page.goto(base + '/');
  await page.type('input[name=user]', user);
  await page.type('input[name=password]', password);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
}
async function sessionCookie(page, base) {
  return (await page.browserContext().cookies(base)).find((c) => c.name === cookieName);
}
// GET /api/me from a page of that instance (the browser sends its cookies).
async function me(page, base) {
  if (!page.url().startsWith(base)) await page.goto(base + '/');
  return page.evaluate(async () => {
    const r = await fetch('/api/me');
    return {status: r.status, body: await r.text()};
  });
}
async function body(page) { return page.evaluate(() => document.body.innerText); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

(async () => {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const evilSite = await evilServer('localhost');
  const evilOrigin = await evilServer('127.0.0.1');
  try {
    // 1. Sign in; the cookie as the browser keeps it; hidden from scripts.
    const ctx1 = await browser.createBrowserContext();
    const p1 = await ctx1.newPage();
    await p1.setViewport({width: 640, height: 420});
    await signIn(p1, A, 'alice', 'wonderland');
    check((await body(p1)).includes('Signed in as alice'), 'signed in: the page says "Signed in as alice"');
    const c1 = await sessionCookie(p1, A);
    check(c1 !== undefined, `the browser keeps a cookie named ${cookieName}`);
    if (c1) {
      check(c1.httpOnly === true, 'the session cookie is HttpOnly');
      check(c1.secure === true, 'the session cookie is Secure');
      check(c1.sameSite === 'Lax', `the session cookie is SameSite=Lax (got ${c1.sameSite})`);
      check(c1.path === '/', `the session cookie's path is / (got ${c1.path})`);
      check(!c1.domain.startsWith('.'), `the session cookie is host-only (domain ${c1.domain})`);
    }
    const visible = await p1.evaluate(() => document.cookie);
    check(!visible.includes(cookieName), `document.cookie does not show the session cookie (it shows "${visible}")`);
    await p1.screenshot({path: path.join(process.env.OUT, 'signed_in.png')});

    // 2. The other instance knows the session.
    await p1.goto(B + '/');
    check((await body(p1)).includes('Signed in as alice'), 'instance B shows the session made through A');
    const onB = await me(p1, B);
    check(onB.status === 200 && JSON.parse(onB.body).user === 'alice', `B's /api/me is alice (got ${onB.status} ${onB.body})`);

    // 3. Fixation: a session cookie planted before login never survives it.
    // (a) An ID of the right shape that the attacker chose: the login form
    // is shown, and login sets a new ID; the planted one is no session.
    const chosen = 'A'.repeat(43);
    const ctxPlant = await browser.createBrowserContext();
    await ctxPlant.setCookie({name: cookieName, value: chosen, url: A + '/', path: '/', secure: true, httpOnly: true, sameSite: 'Lax'});
    const pp = await ctxPlant.newPage();
    await signIn(pp, A, 'alice', 'wonderland');
    const afterChosen = await sessionCookie(pp, A);
    check(afterChosen && afterChosen.value !== chosen, 'login replaced an attacker-chosen session cookie');
    await ctxPlant.setCookie({name: cookieName, value: chosen, url: A + '/', path: '/', secure: true, httpOnly: true, sameSite: 'Lax'});
    check((await me(pp, A)).status === 401, 'the attacker-chosen ID is no session after the login');
    // (b) A live session of the attacker's own (bob) planted in the
    // victim's browser; the victim signs in as alice there.
    const ctxBob = await browser.createBrowserContext();
    const pb = await ctxBob.newPage();
    await signIn(pb, A, 'bob', 'builder');
    const planted = (await sessionCookie(pb, A)).value;
    const ctxVictim = await browser.createBrowserContext();
    await ctxVictim.setCookie({name: cookieName, value: planted, url: A + '/', path: '/', secure: true, httpOnly: true, sameSite: 'Lax'});
    const pv = await ctxVictim.newPage();
    await pv.goto(A + '/');
    check((await body(pv)).includes('Signed in as bob'), 'the planted cookie is in the victim\'s browser before login');
    // The victim's login, posted from this origin by a form on the page.
    await Promise.all([pv.waitForNavigation(), pv.evaluate(() => {
      const f = document.createElement('form');
      f.method = 'post';
      f.action = '/login';
      for (const [n, v] of [['user', 'alice'], ['password', 'wonderland']]) {
        const i = document.createElement('input');
        i.name = n;
        i.value = v;
        f.appendChild(i);
      }
      document.body.appendChild(f);
      f.submit();
    })]);
    const after = await sessionCookie(pv, A);
    check(after && after.value !== planted, 'login replaced the planted session cookie with a new one');
    const victimMe = await me(pv, A);
    check(victimMe.status === 200 && JSON.parse(victimMe.body).user === 'alice', 'the victim is alice under the new cookie');
    const bobMe = await me(pb, A);
    check(bobMe.status !== 200 || JSON.parse(bobMe.body).user !== 'alice', 'the planted ID is not alice\'s session');
    check(bobMe.status === 401, `the session the victim came with ended at login (planted ID now ${bobMe.status})`);

    // 4. Logout ends the session in the store, not only in the browser.
    const ctxOut = await browser.createBrowserContext();
    const po = await ctxOut.newPage();
    await signIn(po, A, 'bob', 'builder');
    const beforeLogout = (await sessionCookie(po, A)).value;
    await Promise.all([po.waitForNavigation(), po.click('form[action="/logout"] button')]);
    check((await sessionCookie(po, A)) === undefined, 'logout removed the cookie from the browser');
    await ctxOut.setCookie({name: cookieName, value: beforeLogout, url: A + '/', path: '/', secure: true, httpOnly: true, sameSite: 'Lax'});
    const replay = await me(po, A);
    check(replay.status === 401, `the logged-out session ID put back is refused (got ${replay.status})`);

    // 5. logout-all from one browser signs the user out of another, on both instances.
    const ctxC1 = await browser.createBrowserContext(), ctxC2 = await browser.createBrowserContext();
    const pc1 = await ctxC1.newPage(), pc2 = await ctxC2.newPage();
    await signIn(pc1, A, 'carol', 'singer');
    await signIn(pc2, B, 'carol', 'singer');
    check((await me(pc2, A)).status === 200, 'carol\'s second browser is signed in (on A too)');
    await Promise.all([pc1.waitForNavigation(), pc1.click('form[action="/logout-all"] button')]);
    check((await body(pc1)).includes('Sign in'), 'logout-all shows the login form');
    check((await me(pc2, A)).status === 401, 'the second browser is signed out on A after logout-all');
    check((await me(pc2, B)).status === 401, 'the second browser is signed out on B after logout-all');

    // 6. A form on another site (and on another origin of this site) that
    // posts to /logout-all changes nothing.
    // Two sessions of alice's made just now (on a slow first run of the
    // browser the steps above can outlast the idle timeout).
    const ctxS1 = await browser.createBrowserContext(), ctxS2 = await browser.createBrowserContext();
    const ps1 = await ctxS1.newPage(), ps2 = await ctxS2.newPage();
    await signIn(ps1, A, 'alice', 'wonderland');
    await signIn(ps2, A, 'alice', 'wonderland');
    check((await me(ps1, A)).status === 200 && (await me(ps2, A)).status === 200, 'alice\'s two sessions are live before the attack');
    for (const [what, url] of [['another site (localhost)', `http://localhost:${evilPort}/`],
                               ['another origin of this site (127.0.0.1, other port)', `http://127.0.0.1:${evilPort + 1}/`]]) {
      const pe = await ctxS1.newPage();
      const nav = pe.waitForNavigation({waitUntil: 'load'}).catch(() => null);
      await pe.goto(url);
      const res = await nav;
      check(res !== null && res.url().startsWith(A) && res.status() === 403,
            `the cross-site post from ${what} is refused (${res ? res.status() + ' ' + res.url() : 'no navigation'})`);
      await pe.close();
      const still = await me(ps1, A);
      check(still.status === 200 && JSON.parse(still.body).user === 'alice', `alice is still signed in after the post from ${what}`);
      check((await me(ps2, A)).status === 200, `alice's other session is alive after the post from ${what}`);
    }

    // A login posted from another site (the attacker's credentials, to sign
    // the victim in as the attacker) is refused too: no session appears.
    const ctxLoginCsrf = await browser.createBrowserContext();
    const pl = await ctxLoginCsrf.newPage();
    const loginNav = pl.waitForNavigation({waitUntil: 'load'}).catch(() => null);
    await pl.goto(`http://localhost:${evilPort}/login`);
    const loginRes = await loginNav;
    check(loginRes !== null && loginRes.status() === 403, `a login posted from another site is refused (${loginRes ? loginRes.status() : 'no navigation'})`);
    check((await sessionCookie(pl, A)) === undefined, 'the cross-site login set no session cookie');
    check((await me(pl, A)).status === 401, 'the browser is not signed in as the attacker');

    // 7. After the idle timeout the session is gone (judged by the store).
    const ctxIdle = await browser.createBrowserContext();
    const pi = await ctxIdle.newPage();
    await signIn(pi, A, 'alice', 'wonderland');
    check((await me(pi, B)).status === 200, 'a fresh session is live');
    await sleep((idleSeconds + 1.5) * 1000);
    check((await me(pi, B)).status === 401, `after ${idleSeconds} s idle the session is gone on B`);
    check((await me(pi, A)).status === 401, `after ${idleSeconds} s idle the session is gone on A`);
  } catch (e) {
    failures++;
    console.log(`FAIL: ${e.stack || e}`);
  } finally {
    evilSite.close();
    evilOrigin.close();
    await browser.close();
  }
  console.log(failures === 0 ? 'web session: all checks passed' : `web session: ${failures} failed`);
  process.exit(failures === 0 ? 0 : 1);
})();
