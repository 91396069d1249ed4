// The words after `npm run bench --`: plain words are filters (a case runs
// when its "file › case name" contains one of them), and `--name value`,
// `--name=value` or a bare `--name` are options a bench file reads (a
// value must be a number in the `--name value` form, so a filter word after
// a bare flag stays a filter: `--huge fleet`). Each option has an
// environment variable too, which the command line overrides.

/** Splits `argv` (the words after the script) into filter words and options. */
export const benchArguments = (argv) => {
  const filters = []
  const options = {}
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]
    if (!word.startsWith("--")) {
      filters.push(word.toLowerCase())
      continue
    }
    const [name, inline] = word.slice(2).split(/=(.*)/s, 2)
    if (inline !== undefined) options[name] = inline
    else if (i + 1 < argv.length && /^[0-9][0-9_,]*$/.test(argv[i + 1])) options[name] = argv[++i]
    else options[name] = true
  }
  return { filters, options }
}

const given = (name, variable) => {
  const { options } = benchArguments(process.argv.slice(2))
  return options[name] ?? process.env[variable]
}

/** A whole number (positive, or also 0 with `zero`) from `--name N` or the environment variable, else `fallback`. */
export const countOption = (name, variable, fallback, { zero = false } = {}) => {
  const value = given(name, variable)
  if (value === undefined || value === "") return fallback
  const n = Number(String(value).replace(/[_,]/g, ""))
  if (!Number.isSafeInteger(n) || n < (zero ? 0 : 1)) {
    throw new TypeError(`--${name} (${variable}) must be a ${zero ? "" : "positive "}whole number, got ${JSON.stringify(value)}`)
  }
  return n
}

/** True when `--name` is given, or the environment variable is set to anything but "", "0" or "false". */
export const flagOption = (name, variable) => {
  const value = given(name, variable)
  return value === true || (value !== undefined && !["", "0", "false"].includes(String(value)))
}
