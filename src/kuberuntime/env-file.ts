/**
 * The env file format of `env[].valueFrom.fileKeyRef` (EnvFiles, beta and on by default
 * at v1.37), read as upstream's envutil.ParseEnv does: `KEY='value'` lines, values in
 * single quotes and possibly spanning lines, blank lines and `#` comments skipped, no
 * whitespace before `=`. `KEY= 'x'` (a space after `=`) leaves KEY empty, as bash would.
 */

/**
 * The value of `key` in `text`; '' when the key is absent (or empty). Throws an Error
 * naming the line when the file is malformed.
 */
export function envFileValue(text: string, key: string): string {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const lineNum = i + 1;
    const line = (lines[i] ?? '').replace(/^[ \t]+/, '');
    if (line === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq < 0)
      throw new Error(`invalid environment variable format at line ${lineNum}: missing '='`);
    const namePart = line.slice(0, eq);
    const name = namePart.replace(/[ \t]+$/, '');
    if (name === '') {
      throw new Error(
        `invalid environment variable format at line ${lineNum}: empty variable name`,
      );
    }
    if (name !== namePart) {
      throw new Error(
        `invalid environment variable format at line ${lineNum}: whitespace before '=' is not allowed`,
      );
    }
    const valuePart = line.slice(eq + 1);
    const trimmed = valuePart.replace(/^[ \t]+/, '');
    if (trimmed !== valuePart) {
      if (name === key) return '';
      continue;
    }
    if (!trimmed.startsWith("'")) {
      throw new Error(
        `invalid environment variable format at line ${lineNum}: value must be enclosed in single quotes`,
      );
    }
    let rest = trimmed.slice(1);
    let value = '';
    const start = lineNum;
    for (;;) {
      const close = rest.indexOf("'");
      if (close >= 0) {
        value += rest.slice(0, close);
        const after = rest.slice(close + 1).replace(/^[ \t]+/, '');
        if (after !== '' && !after.startsWith('#')) {
          throw new Error(
            `invalid environment variable format at line ${i + 1}: unexpected content after closing quote`,
          );
        }
        if (name === key) return value;
        break;
      }
      value += `${rest}\n`;
      i++;
      if (i >= lines.length || (i === lines.length - 1 && lines[i] === '')) {
        throw new Error(
          `invalid environment variable format starting at line ${start}: unclosed single quote`,
        );
      }
      rest = lines[i] ?? '';
    }
  }
  return '';
}
