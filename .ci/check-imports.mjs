#!/usr/bin/env node
// The import graph of the packages shows their design: no module of
// packages/*/src reaches itself through its imports (type-only imports
// count: a type circle still ties the modules' meaning together), no
// package imports a package that imports it, and the core's floors are
// kept: its domain folders, errors and validation at the bottom, then the
// ports, then the Effect service, then the Promise facade, with the entry
// points (index, adapter) on top. A module may import its own floor and the
// floors below it, never one above. The Promise package (packages/promise)
// imports neither `effect` nor `@effect/*`: it re-exports the Promise API
// for apps on any Effect, and its own Effect 3 stays inside the adapters.
//
//   node .ci/check-imports.mjs          # exits 1 and names every circle and every upward import
//
// Imports are read with a regular expression (`import … from`, `export …
// from`, `import "…"`, `import("…")`), comments dropped first; relative
// specifiers resolve to the .ts file the compiler would pick.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const packagesDir = join(root, "packages")

/** The core's floors, lowest first; a module's floor is its folder's (or its own name's, at the top of src). */
const coreFloors = [
  ["operation", "watch", "due", "syncstate", "pendingauth", "relist", "operator", "limits", "errors", "validation", "optionNames", "clock", "versioned"],
  ["ports"],
  ["service"],
  ["promise"],
  ["index", "adapter"]
]

const walk = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : path.endsWith(".ts") && !path.endsWith(".d.ts") ? [path] : []
  })

/** The source without comments, strings kept (a `//` inside a string, such as a URL, is not a comment). */
export const stripComments = (source) =>
  source.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)/g, (match, string) => string ?? "")

const importPattern = new RegExp(
  [
    // import x from "…", import type { … } from "…", import * as x from "…", export { … } from "…", export * from "…"
    String.raw`(?:^|[\n;])\s*(?:import|export)\s+(?:type\s+)?(?:[\w$]+\s*,\s*)?(?:\{[^}]*\}|\*(?:\s+as\s+[\w$]+)?|[\w$]+)\s*from\s*["']([^"']+)["']`,
    // import "…"
    String.raw`(?:^|[\n;])\s*import\s*["']([^"']+)["']`,
    // import("…"), in code or in a type
    String.raw`\bimport\s*\(\s*["']([^"']+)["']\s*\)`
  ].join("|"),
  "g"
)

/** The specifiers `source` imports. */
export const specifiersOf = (source) =>
  [...stripComments(source).matchAll(importPattern)].map((match) => match[1] ?? match[2] ?? match[3])

/** The .ts file a relative specifier of `from` names, or undefined. */
const resolveRelative = (from, specifier) => {
  const base = resolve(dirname(from), specifier)
  const candidates = [base.replace(/\.(m|c)?js$/, ".$1ts"), base, `${base}.ts`, join(base, "index.ts")]
  return candidates.find((path) => path.endsWith(".ts") && existsSync(path) && statSync(path).isFile())
}

const packages = readdirSync(packagesDir).filter((name) => existsSync(join(packagesDir, name, "package.json")))
const packageNameOf = new Map(packages.map((dir) => [JSON.parse(readFileSync(join(packagesDir, dir, "package.json"), "utf8")).name, dir]))

const problems = []
const packageEdges = new Map(packages.map((dir) => [dir, new Set()]))
/** Module → the modules it imports, every package's together (relative imports stay inside a package). */
const moduleEdges = new Map()

for (const dir of packages) {
  const src = join(packagesDir, dir, "src")
  if (!existsSync(src)) continue
  for (const file of walk(src)) {
    const targets = new Set()
    for (const specifier of specifiersOf(readFileSync(file, "utf8"))) {
      if (specifier.startsWith(".")) {
        const target = resolveRelative(file, specifier)
        if (target === undefined) problems.push(`${relative(root, file)}: cannot resolve ${specifier}`)
        else targets.add(target)
        continue
      }
      const name = /^(@[^/]+\/[^/]+|[^/]+)/.exec(specifier)?.[1]
      if (dir === "promise" && (name === "effect" || name?.startsWith("@effect/"))) {
        problems.push(`${relative(root, file)} imports ${specifier}: the Promise package only re-exports the Promise API, whose callers bring no Effect`)
      }
      const other = packageNameOf.get(name)
      if (other !== undefined && other !== dir) packageEdges.get(dir).add(other)
    }
    moduleEdges.set(file, targets)
  }
}

/**
 * The circles of `edges` a depth-first search closes (one per edge back to a
 * module still open): none exactly when the graph has no circle at all.
 */
const circlesOf = (edges) => {
  const circles = []
  const seen = new Set()
  const state = new Map()
  const stack = []
  const visit = (node) => {
    state.set(node, "open")
    stack.push(node)
    for (const next of edges.get(node) ?? []) {
      if (state.get(next) === "open") {
        const circle = stack.slice(stack.indexOf(next))
        const start = circle.indexOf([...circle].sort()[0])
        const rotated = [...circle.slice(start), ...circle.slice(0, start)]
        const key = rotated.join("\n")
        if (!seen.has(key)) {
          seen.add(key)
          circles.push(rotated)
        }
      } else if (!state.has(next)) visit(next)
    }
    stack.pop()
    state.set(node, "done")
  }
  for (const node of [...edges.keys()].sort()) if (!state.has(node)) visit(node)
  return circles
}

for (const circle of circlesOf(moduleEdges)) {
  const names = circle.map((file) => relative(root, file))
  problems.push(`import circle: ${[...names, names[0]].join(" → ")}`)
}
for (const circle of circlesOf(packageEdges)) {
  problems.push(`package circle: ${[...circle, circle[0]].join(" → ")}`)
}

const coreSrc = join(packagesDir, "core", "src")
const floorOf = (file) => {
  const [first] = relative(coreSrc, file).split("/")
  const name = first.replace(/\.ts$/, "")
  const floor = coreFloors.findIndex((names) => names.includes(name))
  if (floor < 0) problems.push(`${relative(root, file)}: no floor of the core holds ${first} (add it to coreFloors in .ci/check-imports.mjs)`)
  return floor
}
for (const [file, targets] of moduleEdges) {
  if (!file.startsWith(coreSrc + "/")) continue
  const floor = floorOf(file)
  for (const target of targets) {
    const targetFloor = floorOf(target)
    if (floor >= 0 && targetFloor > floor) {
      problems.push(`${relative(root, file)} (floor ${coreFloors[floor].join("/")}) imports ${relative(root, target)}, a higher floor (${coreFloors[targetFloor].join("/")})`)
    }
  }
}
if (packageEdges.get("core")?.size) problems.push(`packages/core imports ${[...packageEdges.get("core")].join(", ")}: the core depends on no other package`)

if (problems.length > 0) {
  console.error([...new Set(problems)].join("\n"))
  console.error(`\ncheck-imports: ${new Set(problems).size} problem(s)`)
  process.exit(1)
}
const count = [...moduleEdges.values()].reduce((sum, targets) => sum + targets.size, 0)
console.log(`check-imports: ${moduleEdges.size} modules, ${count} relative imports, no circle, the core's floors kept`)
