import { readFileSync } from "node:fs"
import { relative } from "node:path"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/** The committed seconds each test file took in a full run on the CI machine (`node test/support/durations.mjs`). */
const committed: Readonly<Record<string, number>> = JSON.parse(
  readFileSync(new URL("./durations.json", import.meta.url), "utf8")
)

/**
 * Runs the longest test files first, so the last files to start are short
 * and no worker runs alone at the end: by vitest's own timing of the
 * file's last run on this machine when it has one, else by the committed
 * timings, and a file with neither (a new one) first of all.
 */
export default class LongestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const root = this.ctx.config.root
    const seconds = (file: TestSpecification): number => {
      const path = relative(root, file.moduleId)
      const cached = this.ctx.cache.getFileTestResults(`${file.project.name}:${path}`)
      return cached !== undefined ? cached.duration / 1000 : committed[path] ?? Number.POSITIVE_INFINITY
    }
    return [...files].sort((a, b) => seconds(b) - seconds(a))
  }
}
