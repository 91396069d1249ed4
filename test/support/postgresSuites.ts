import type { RunnerTask, RunnerTestSuite } from "vitest"

const POSTGRES = /postgres/i

const skipAll = (task: RunnerTask): number => {
  task.mode = "skip"
  task.result = { ...task.result, state: "skip" }
  return task.type === "suite" ? task.tasks.reduce((count, child) => count + skipAll(child), 0) : 1
}

/**
 * Marks every suite and test of `file` whose name says Postgres as skipped
 * (returns how many tests that is). Called from a file-level `beforeAll`
 * when no Postgres server answered, so each Postgres suite of a file is
 * reported as skipped, hooks included, instead of failing on connect or
 * vanishing from the count.
 */
export const skipPostgresSuites = (file: Readonly<RunnerTestSuite>): number => {
  const visit = (task: RunnerTask): number => {
    if (POSTGRES.test(task.name)) return skipAll(task)
    return task.type === "suite" ? task.tasks.reduce((count, child) => count + visit(child), 0) : 0
  }
  return file.tasks.reduce((count, task) => count + visit(task), 0)
}
