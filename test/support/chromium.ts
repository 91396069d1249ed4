import { existsSync } from "node:fs"

/** Debian's Chromium, which the browser suites drive through playwright-core (which never downloads one). */
export const CHROMIUM_PATH = process.env["CONNECTOR_STORE_CHROMIUM"] ?? "/usr/bin/chromium"

/** Set in CI: a missing Chromium is an error there, not a skip. */
export const CHROMIUM_REQUIRED = process.env["CONNECTOR_STORE_REQUIRE_CHROMIUM"] === "1"

/** Whether the browser suites can run here; without Chromium they are skipped loudly, or fail when it is required. */
export const chromiumAvailable: boolean = existsSync(CHROMIUM_PATH)
if (!chromiumAvailable) {
  if (CHROMIUM_REQUIRED) throw new Error(`Chromium is required (CONNECTOR_STORE_REQUIRE_CHROMIUM=1) but ${CHROMIUM_PATH} does not exist`)
  console.warn(`\n*** browser suites SKIPPED: no Chromium at ${CHROMIUM_PATH} (apt-get install -y chromium) ***\n`)
}

/** How playwright-core starts it: headless, no sandbox (CI runs as root), no GPU. */
export const CHROMIUM_LAUNCH: { readonly executablePath: string; readonly args: Array<string> } = {
  executablePath: CHROMIUM_PATH,
  args: ["--no-sandbox", "--headless", "--disable-gpu"]
}
