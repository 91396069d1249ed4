import type { Command } from "@effect/cli"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Option from "effect/Option"

/** One flag of a command, as its help shows it and as the argument check reads it. */
export interface FlagSpec {
  /** The long name without dashes: `database`. */
  readonly name: string
  /** Other spellings, dashes included: `-d`, `--file`. */
  readonly aliases: ReadonlyArray<string>
  readonly kind: "bool" | "integer" | "choice" | "text"
  readonly choices: ReadonlyArray<string>
  readonly repeatable: boolean
  readonly required: boolean
  /** The default as help shows it, when there is one worth showing. */
  readonly defaultText: string | undefined
  readonly description: string
}

/** A command (or a group of them) as its help shows it. */
export interface CommandSpec {
  /** `["connector-store", "relist", "list"]`. */
  readonly path: ReadonlyArray<string>
  readonly description: string
  readonly flags: ReadonlyArray<FlagSpec>
  readonly children: ReadonlyArray<CommandSpec>
}

// @effect/cli's descriptors and options are tagged trees; only the shapes read here matter.
interface Node {
  readonly _tag: string
  readonly [key: string]: any
}

const ANSI = /\x1b\[[0-9;]*m/g

/** Text without ANSI escapes, its whitespace collapsed. */
export const plainText = (text: string): string => text.replace(ANSI, "").replace(/\s+/g, " ").trim()

const docText = (doc: unknown): string => doc === undefined ? "" : plainText(HelpDoc.toAnsiText(doc as HelpDoc.HelpDoc))

/**
 * `fields` with a `description`: the text of `doc`, rendered when first
 * read. Only help reads descriptions, and rendering every command's and
 * flag's takes a part of each run's start that the argument check and a
 * command's work do without.
 */
const described = <A extends object>(fields: A, doc: unknown): A & { readonly description: string } => {
  let text: string | undefined
  return Object.defineProperty(fields, "description", { enumerable: true, get: () => text ??= docText(doc) }) as A & {
    readonly description: string
  }
}

interface Context {
  readonly optional: boolean
  readonly repeatable: boolean
  readonly defaultText: string | undefined
}

const flagsOf = (node: Node | undefined, context: Context): ReadonlyArray<FlagSpec> => {
  if (node === undefined) return []
  switch (node._tag) {
    case "Single": {
      const primitive = node["primitiveType"] as Node
      const kind = primitive._tag === "Bool"
        ? "bool"
        : primitive._tag === "Integer"
        ? "integer"
        : primitive._tag === "Choice"
        ? "choice"
        : "text"
      return [described({
        name: node["name"] as string,
        aliases: (node["aliases"] as ReadonlyArray<string>).map((alias) => alias.length === 1 ? `-${alias}` : `--${alias}`),
        kind,
        choices: kind === "choice" ? (primitive["alternatives"] as ReadonlyArray<[string, unknown]>).map(([name]) => name) : [],
        repeatable: context.repeatable,
        required: !context.optional && kind !== "bool",
        defaultText: context.defaultText
      }, node["description"])]
    }
    case "WithDefault": {
      const fallback = node["fallback"]
      const shown = Option.isOption(fallback) || fallback === false || Array.isArray(fallback) ? undefined : String(fallback)
      return flagsOf(node["options"], { ...context, optional: true, defaultText: shown })
    }
    case "WithFallback":
      return flagsOf(node["options"], { ...context, optional: true })
    case "Variadic":
    case "KeyValueMap":
      return flagsOf(node["argumentOption"], { ...context, optional: true, repeatable: true })
    case "Map":
      return flagsOf(node["options"], context)
    case "Both":
      return [...flagsOf(node["left"], context), ...flagsOf(node["right"], context)]
    case "OrElse":
      return [...flagsOf(node["left"], { ...context, optional: true }), ...flagsOf(node["right"], { ...context, optional: true })]
    default:
      return []
  }
}

/** The help document of a command node: a `Map` or `Subcommands` node's is its inner command's. */
const descriptionOf = (node: Node): unknown =>
  node._tag === "Map" ? descriptionOf(node["command"]) : node._tag === "Subcommands" ? descriptionOf(node["parent"]) : node["description"]

const specOf = (node: Node, parents: ReadonlyArray<string>): CommandSpec => {
  switch (node._tag) {
    case "Map":
      return specOf(node["command"], parents)
    case "Subcommands": {
      const parent = specOf(node["parent"], parents)
      return described({
        path: parent.path,
        flags: parent.flags,
        children: (node["children"] as ReadonlyArray<Node>).map((child) => specOf(child, parent.path))
      }, descriptionOf(node["parent"]))
    }
    default:
      return described({
        path: [...parents, node["name"] as string],
        flags: flagsOf(node["options"], { optional: false, repeatable: false, defaultText: undefined }),
        children: []
      }, node["description"])
  }
}

/** The spec of `command` and every subcommand under it, read from its @effect/cli descriptor. */
export const commandSpecOf = (command: Command.Command<any, any, any, any>): CommandSpec =>
  specOf((command as unknown as { readonly descriptor: Node }).descriptor, [])

const flagLabel = (flag: FlagSpec): string => {
  const names = [...flag.aliases.filter((alias) => alias.length === 2), `--${flag.name}`, ...flag.aliases.filter((alias) => alias.length > 2)]
  const value = flag.kind === "bool" ? "" : flag.kind === "choice" ? ` ${flag.choices.join("|")}` : flag.kind === "integer" ? " <n>" : " <text>"
  return `${names.join(", ")}${value}`
}

const WIDTH = 100

/** `text` wrapped to `width` columns, later lines indented by `indent`. */
const wrapped = (text: string, indent: number, first: number): string => {
  const lines: Array<string> = []
  let line = ""
  let room = WIDTH - first
  for (const word of text.split(" ")) {
    if (line.length > 0 && line.length + 1 + word.length > room) {
      lines.push(line)
      line = word
      room = WIDTH - indent
    } else {
      line = line.length === 0 ? word : `${line} ${word}`
    }
  }
  lines.push(line)
  return lines.join(`\n${" ".repeat(indent)}`)
}

const flagLine = (flag: FlagSpec, column: number): string => {
  const notes = [
    flag.defaultText === undefined ? undefined : `default ${flag.defaultText}`,
    flag.repeatable ? "repeatable" : undefined
  ].filter((note) => note !== undefined)
  const description = flag.description + (notes.length === 0 ? "" : ` (${notes.join("; ")})`)
  const label = `  ${flagLabel(flag)}`
  return label.length + 2 > column
    ? `${label}\n${" ".repeat(column)}${wrapped(description, column, column)}`
    : `${label.padEnd(column)}${wrapped(description, column, column)}`
}

/**
 * The help of `spec`, plain text (no colour codes, whatever the terminal):
 * what it does, its usage line, then its required flags, its optional ones
 * (with their defaults) and its subcommands, one line each.
 */
export const helpText = (spec: CommandSpec): string => {
  const name = spec.path.join(" ")
  const out: Array<string> = [`${name}: ${spec.description}`, ""]
  if (spec.children.length > 0) {
    out.push(`Usage: ${name} <command> [options]`, "", "Commands:")
    const column = Math.max(...spec.children.map((child) => child.path[child.path.length - 1]!.length)) + 4
    for (const child of spec.children) {
      out.push(`  ${child.path[child.path.length - 1]!.padEnd(column - 2)}${wrapped(child.description, column, column)}`)
    }
    out.push("", `Run "${name} <command> --help" for a command's options.`)
    return out.join("\n")
  }
  const required = spec.flags.filter((flag) => flag.required)
  const optional = spec.flags.filter((flag) => !flag.required)
  out.push(`Usage: ${[name, ...required.map(flagLabel), ...(optional.length > 0 ? ["[options]"] : [])].join(" ")}`)
  const column = Math.min(34, Math.max(...spec.flags.map((flag) => flagLabel(flag).length + 4), 0))
  if (required.length > 0) out.push("", "Required:", ...required.map((flag) => flagLine(flag, column)))
  if (optional.length > 0) out.push("", "Options:", ...optional.map((flag) => flagLine(flag, column)))
  out.push("", "  -h, --help".padEnd(column) + "Show this help")
  return out.join("\n")
}

/** The closest of `candidates` to `word` by edit distance, when it is close (at most 2 edits). */
export const nearest = (word: string, candidates: ReadonlyArray<string>): string | undefined => {
  const distance = (a: string, b: string): number => {
    const row = Array.from({ length: b.length + 1 }, (_, j) => j)
    for (let i = 1; i <= a.length; i++) {
      let previous = row[0]!
      row[0] = i
      for (let j = 1; j <= b.length; j++) {
        const saved = row[j]!
        row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1))
        previous = saved
      }
    }
    return row[b.length]!
  }
  let best: string | undefined
  let bestDistance = 3
  for (const candidate of candidates) {
    const d = distance(word, candidate)
    if (d < bestDistance) {
      best = candidate
      bestDistance = d
    }
  }
  return best
}

/** True when `args` ask for help (`--help` or `-h` anywhere). */
export const wantsHelp = (args: ReadonlyArray<string>): boolean => args.some((arg) => arg === "--help" || arg === "-h")

/** The command `args` name (as deep as they go) and the index of the first argument after its name. */
export const commandOf = (root: CommandSpec, args: ReadonlyArray<string>): { readonly spec: CommandSpec; readonly next: number } => {
  let spec = root
  let next = 0
  for (;;) {
    const word = args[next]
    const child = spec.children.find((candidate) => candidate.path[candidate.path.length - 1] === word)
    if (child === undefined) return { spec, next }
    spec = child
    next++
  }
}

const isFlagToken = (token: string): boolean => /^--[A-Za-z]/.test(token) || /^-[A-Za-z]$/.test(token)

/**
 * What is wrong with `args` (the arguments after the program's name) for
 * the commands of `root`, in one line; `undefined` when nothing this check
 * knows of is. It names the real problem where @effect/cli's parser would
 * not: an unknown command or flag (and the nearest known one), a flag given
 * twice, a flag without its value, a value that is not an integer or not
 * one of the choices, a stray argument.
 */
export const argumentProblem = (root: CommandSpec, args: ReadonlyArray<string>): string | undefined => {
  const { spec, next } = commandOf(root, args)
  const name = spec.path.join(" ")
  if (spec.children.length > 0) {
    const names = spec.children.map((child) => child.path[child.path.length - 1]!)
    const word = args[next]
    if (word === undefined) {
      return `${spec.path.length > 1 ? spec.path.slice(1).join(" ") : name} needs a command: one of ${names.join(", ")} (see ${name} --help)`
    }
    const close = nearest(word, names)
    return `unknown command "${word}" for ${name}${close === undefined ? "" : ` (did you mean ${close}?)`}: use one of ${names.join(", ")}`
  }
  const lookup = new Map<string, FlagSpec>()
  for (const flag of spec.flags) {
    lookup.set(`--${flag.name}`, flag)
    for (const alias of flag.aliases) lookup.set(alias, flag)
  }
  const seen = new Set<string>()
  for (let i = next; i < args.length; i++) {
    const token = args[i]!
    if (!isFlagToken(token)) {
      return `unexpected argument "${token}": ${name} takes only options (see ${name} --help)`
    }
    const equals = token.indexOf("=")
    const written = equals > 0 ? token.slice(0, equals) : token
    const inline = equals > 0 ? token.slice(equals + 1) : undefined
    const flag = lookup.get(written)
    if (flag === undefined) {
      const close = nearest(written, [...lookup.keys()].filter((key) => key.startsWith("--")))
      return `unknown option ${written} for ${name}${close === undefined ? "" : ` (did you mean ${close}?)`}`
    }
    if (seen.has(flag.name) && !flag.repeatable) return `--${flag.name} is given twice; give it once`
    seen.add(flag.name)
    if (flag.kind === "bool") {
      if (inline !== undefined) return `--${flag.name} takes no value (got "${inline}")`
      continue
    }
    let value = inline
    if (value === undefined) {
      const following = args[i + 1]
      if (following === undefined || lookup.has(following.split("=")[0]!)) {
        return `--${flag.name} needs a value${flag.kind === "choice" ? `: one of ${flag.choices.join(", ")}` : ""}`
      }
      value = following
      i++
    }
    if (flag.kind === "integer" && !/^-?\d+$/.test(value)) return `--${flag.name} must be an integer, got "${value}"`
    if (flag.kind === "choice" && !flag.choices.includes(value)) {
      return `--${flag.name} must be one of ${flag.choices.join(", ")}; got "${value}"`
    }
  }
  const missing = spec.flags.filter((flag) => flag.required && !seen.has(flag.name))
  if (missing.length > 0) {
    return `${spec.path.slice(1).join(" ")} needs ${missing.map((flag) => `--${flag.name}`).join(", ")} (see ${name} --help)`
  }
  return undefined
}
