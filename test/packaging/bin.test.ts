import { execFileSync, spawnSync } from "node:child_process"
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

// `npx --no-install connector-store …` in the repository after `npm ci`: npm
// links a workspace's bin only when its target exists at install time, and
// dist/ does not exist then.

const root = fileURLToPath(new URL("../..", import.meta.url))
const cli = join(root, "packages/cli")
const manifest = JSON.parse(readFileSync(join(cli, "package.json"), "utf8")) as { bin: Record<string, string> }
const target = manifest.bin["connector-store"]!
const work = mkdtempSync(join(tmpdir(), "connector-store-bin-"))
afterAll(() => rmSync(work, { recursive: true, force: true }))

describe("the connector-store bin", () => {
  it("points at a file of the repository, not at a build output", () => {
    const tracked = execFileSync("git", ["ls-files", "--error-unmatch", target], { cwd: cli, encoding: "utf8" })
    expect(tracked.trim()).toBe(target.replace(/^\.\//, ""))
  })

  it("is linked by a fresh install of an unbuilt workspace, and says how to build when run before the build", () => {
    // The CLI package as a clone has it (its tracked files: no dist/), without dependencies to fetch, in a workspace of its own.
    const app = join(work, "repo")
    mkdirSync(join(app, "packages/cli"), { recursive: true })
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "repo", private: true, workspaces: ["packages/cli"] }))
    for (const file of execFileSync("git", ["ls-files"], { cwd: cli, encoding: "utf8" }).split("\n").filter(Boolean)) {
      mkdirSync(dirname(join(app, "packages/cli", file)), { recursive: true })
      cpSync(join(cli, file), join(app, "packages/cli", file))
    }
    writeFileSync(join(app, "packages/cli/package.json"), JSON.stringify({ name: "@connector-store/cli", version: "0.0.0", type: "module", bin: manifest.bin }))
    execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"], { cwd: app })
    const ran = spawnSync("npx", ["--no-install", "connector-store", "--help"], { cwd: app, encoding: "utf8" })
    expect(ran.stderr).toContain("is not built yet: run `npm run build`")
    expect(ran.status).toBe(1)
  })

  it("runs the built CLI through npx --no-install from the repository root", () => {
    const ran = spawnSync("npx", ["--no-install", "connector-store", "--help"], { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } })
    expect(ran.stdout).toContain("connector-store")
    expect(ran.status).toBe(0)
  })
})
