/**
 * Parser for the legacy XML sending API (POST /xml, form field XMLDATA).
 *
 * Request document:
 *
 *   <RequestDocument>
 *     <RequestList>
 *       <Request Type="high|lowcost|direct" Sender="optional">
 *         <Message Type="Text">text</Message>
 *         <NumbersList><Number>+420777123456</Number>...</NumbersList>
 *       </Request>
 *       ...
 *     </RequestList>
 *   </RequestDocument>
 *
 * Pure function, no I/O. The document is streamed through sax in STRICT mode
 * with a small state machine (no DOM). DTDs are refused outright (any
 * <!DOCTYPE ...> answers 102), so neither internal entity expansion
 * ("billion laughs") nor external entities (SYSTEM "file:///...") can happen;
 * only the five predefined XML entities and numeric character references are
 * expanded. Known sax leniency: a duplicated attribute is not reported (sax
 * silently keeps the first value).
 *
 * Error IDs (decision D9) — the document is checked WHOLE before anything is
 * accepted, and exactly one error answers:
 *   101 XMLDATA missing or empty (whitespace only counts as empty)
 *   102 malformed: over MAX_XML_BYTES, not well-formed, DOCTYPE present, wrong
 *       root, no RequestList, no Request, unknown/missing Request@Type,
 *       more than one Message in a Request
 *   109 a Request without a Message element or without NumbersList/Number
 *   201 a Number whose digit-stripped form is empty
 *   202 text empty (or whitespace only) or longer than 1000 code points
 *   203 invalid Request@Sender
 *
 * Which problem is "first":
 *   1. Document-level problems (size cap, well-formedness, DOCTYPE, root,
 *      RequestList, no Request) always win: the document must be readable as
 *      a whole before any single Request is judged.
 *   2. Otherwise the first Request (in document order) that has a problem
 *      answers; within one Request the checks run in the order
 *      102 Type → 109 → 201 → 202 → 203.
 */
import sax from 'sax';
import type { QualifiedTag, SAXOptions, Tag } from 'sax';

export type XmlRequestType = 'high' | 'lowcost' | 'direct';

export interface XmlRequest {
  type: XmlRequestType;
  sender?: string;
  text: string;
  numbers: string[];
}

export type XmlParseResult =
  | { ok: true; requests: XmlRequest[] }
  | { ok: false; errorId: number; message: string };

/** Cap on the UTF-8 size of XMLDATA; anything larger answers 102. */
export const MAX_XML_BYTES: number = 256 * 1024;

/** Maximum message text length, in Unicode code points. */
const MAX_TEXT_CODE_POINTS = 1000;

const REQUEST_TYPES: ReadonlySet<string> = new Set<XmlRequestType>(['high', 'lowcost', 'direct']);

/** Numeric sender: digits only, optional leading '+', 1..15 digits. */
const NUMERIC_SENDER = /^\+?[0-9]{1,15}$/;
/**
 * Alphanumeric sender: 1..11 characters of ASCII letters/digits, plus inner
 * space, '.', '-' and '_' (the sender is trimmed first, so it never starts or
 * ends with a space).
 */
const ALPHANUMERIC_SENDER = /^[A-Za-z0-9](?:[A-Za-z0-9 ._-]{0,10})$/;

/**
 * Characters that may not appear in a well-formed XML document at all, even
 * via a character reference (C0 controls except TAB/LF/CR, U+FFFE/U+FFFF and
 * unpaired surrogates). sax checks character references but not raw
 * characters, so text and attribute values are checked here.
 */
const INVALID_XML_CHAR =
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const ROOT = 'RequestDocument';
const REQUEST_LIST = 'RequestList';
const REQUEST = 'Request';
const MESSAGE = 'Message';
const NUMBERS_LIST = 'NumbersList';
const NUMBER = 'Number';

interface Problem {
  errorId: number;
  message: string;
}

/** Thrown from our own handlers to stop sax at the first fatal problem. */
class StopParsing extends Error {}

interface RequestBuilder {
  index: number; // 1-based position in the document, for messages
  typeAttr: string | undefined;
  senderAttr: string | undefined;
  messageCount: number;
  text: string;
  sawNumbersList: boolean;
  numbers: string[];
}

type Capture = { kind: 'message' | 'number'; depth: number };

function fail(errorId: number, message: string): XmlParseResult {
  return { ok: false, errorId, message };
}

function attr(tag: Tag | QualifiedTag, name: string): string | undefined {
  const value: unknown = tag.attributes[name];
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object' && 'value' in value) {
    const v: unknown = (value as { value: unknown }).value;
    return typeof v === 'string' ? v : undefined;
  }
  return undefined;
}

function codePointLength(s: string): number {
  let n = 0;
  // for..of iterates by code point (surrogate pairs count once)
  for (const _ of s) n++;
  return n;
}

/** Validates one finished Request; returns the first problem or the request. */
function finishRequest(b: RequestBuilder): Problem | XmlRequest {
  const where = `Request #${b.index}`;

  const type = b.typeAttr?.trim().toLowerCase();
  if (type === undefined || !REQUEST_TYPES.has(type)) {
    return {
      errorId: 102,
      message: `${where}: unknown or missing Type (expected high, lowcost or direct)`,
    };
  }
  if (b.messageCount > 1) {
    return { errorId: 102, message: `${where}: more than one Message element` };
  }

  if (b.messageCount === 0) {
    return { errorId: 109, message: `${where}: Message element missing` };
  }
  if (!b.sawNumbersList || b.numbers.length === 0) {
    return { errorId: 109, message: `${where}: NumbersList/Number missing` };
  }

  for (let i = 0; i < b.numbers.length; i++) {
    const number = b.numbers[i] ?? '';
    if (!/[0-9]/.test(number)) {
      return { errorId: 201, message: `${where}: Number #${i + 1} contains no digits` };
    }
  }

  if (b.text.trim() === '') {
    return { errorId: 202, message: `${where}: message text is empty` };
  }
  const length = codePointLength(b.text);
  if (length > MAX_TEXT_CODE_POINTS) {
    return {
      errorId: 202,
      message: `${where}: message text too long (${length} > ${MAX_TEXT_CODE_POINTS} characters)`,
    };
  }

  let sender: string | undefined;
  if (b.senderAttr !== undefined) {
    const trimmed = b.senderAttr.trim();
    if (trimmed !== '') {
      if (!NUMERIC_SENDER.test(trimmed) && !ALPHANUMERIC_SENDER.test(trimmed)) {
        return {
          errorId: 203,
          message: `${where}: invalid Sender (1-11 alphanumeric characters or a number of up to 15 digits)`,
        };
      }
      sender = trimmed;
    }
  }

  const request: XmlRequest = { type: type as XmlRequestType, text: b.text, numbers: b.numbers };
  if (sender !== undefined) request.sender = sender;
  return request;
}

function isProblem(x: Problem | XmlRequest): x is Problem {
  return 'errorId' in x;
}

/**
 * Parses and validates XMLDATA. Never throws for any input string.
 */
export function parseXmlRequest(xmldata: string | undefined): XmlParseResult {
  if (typeof xmldata !== 'string' || xmldata.trim() === '') {
    return fail(101, 'XMLDATA missing or empty');
  }
  // UTF-8 bytes >= UTF-16 code units, so the cheap length test is a safe shortcut.
  if (xmldata.length > MAX_XML_BYTES || Buffer.byteLength(xmldata, 'utf8') > MAX_XML_BYTES) {
    return fail(102, `XMLDATA exceeds ${MAX_XML_BYTES} bytes`);
  }

  // strictEntities: only &amp; &lt; &gt; &quot; &apos; (+ numeric references);
  // not in @types/sax, hence the widened type.
  const options: SAXOptions & { strictEntities: boolean } = {
    strictEntities: true,
    position: true,
  };
  const parser = sax.parser(true, options);

  const stack: string[] = [];
  let sawRoot = false;
  let sawRequestList = false;
  let requestCount = 0;
  let current: RequestBuilder | undefined;
  let capture: Capture | undefined;
  let fatal: Problem | undefined;
  let firstProblem: Problem | undefined;
  const requests: XmlRequest[] = [];

  const where = (): string => `line ${parser.line + 1}, column ${parser.column + 1}`;
  const stop = (message: string): never => {
    fatal ??= { errorId: 102, message };
    throw new StopParsing(message);
  };
  const checkChars = (s: string, what: string): void => {
    if (INVALID_XML_CHAR.test(s)) stop(`malformed XML: invalid character in ${what} (${where()})`);
  };
  const onText = (t: string): void => {
    checkChars(t, 'text');
    if (capture === undefined || stack.length !== capture.depth) return;
    if (capture.kind === 'message') {
      if (current !== undefined) current.text += t;
    } else if (current !== undefined) {
      const last = current.numbers.length - 1;
      current.numbers[last] = (current.numbers[last] ?? '') + t;
    }
  };

  parser.onerror = (err: Error): void => {
    const first = err.message.split('\n')[0] ?? 'parse error';
    stop(`malformed XML: ${first} (${where()})`);
  };
  parser.ondoctype = (): void => {
    stop('DOCTYPE is not allowed (DTDs and entity declarations are refused)');
  };
  // Any other "<!...>" markup (e.g. a stray <!ENTITY ...>) is not well-formed
  // outside a DTD; sax reports it as an SGML declaration instead of failing.
  parser.onsgmldeclaration = (): void => {
    stop(`malformed XML: unexpected <!...> declaration (${where()})`);
  };
  parser.ontext = onText;
  parser.oncdata = onText;

  parser.onopentag = (tag: Tag | QualifiedTag): void => {
    for (const value of Object.values(tag.attributes)) {
      checkChars(typeof value === 'string' ? value : value.value, 'attribute value');
    }
    const name = tag.name;
    const depth = stack.length;
    const parent = stack[depth - 1];
    stack.push(name);

    if (depth === 0) {
      if (sawRoot) stop(`malformed XML: more than one root element (${where()})`);
      sawRoot = true;
      if (name !== ROOT) stop(`wrong root element <${name.slice(0, 64)}>, expected <${ROOT}>`);
      return;
    }
    if (depth === 1 && name === REQUEST_LIST) {
      sawRequestList = true;
      return;
    }
    if (depth === 2 && parent === REQUEST_LIST && name === REQUEST) {
      requestCount++;
      current = {
        index: requestCount,
        typeAttr: attr(tag, 'Type'),
        senderAttr: attr(tag, 'Sender'),
        messageCount: 0,
        text: '',
        sawNumbersList: false,
        numbers: [],
      };
      return;
    }
    if (current === undefined || depth < 3) return; // unknown element: ignore
    if (depth === 3 && name === MESSAGE) {
      current.messageCount++;
      if (current.messageCount === 1) capture = { kind: 'message', depth: depth + 1 };
      return;
    }
    if (depth === 3 && name === NUMBERS_LIST) {
      current.sawNumbersList = true;
      return;
    }
    if (depth === 4 && parent === NUMBERS_LIST && name === NUMBER) {
      current.numbers.push('');
      capture = { kind: 'number', depth: depth + 1 };
    }
    // anything else inside a Request: ignored
  };

  parser.onclosetag = (): void => {
    const depth = stack.length; // depth of the element being closed (1-based)
    stack.pop();
    if (capture !== undefined && capture.depth === depth) capture = undefined;
    if (depth === 3 && current !== undefined) {
      const last = current.numbers.length;
      for (let i = 0; i < last; i++) current.numbers[i] = (current.numbers[i] ?? '').trim();
      const outcome = finishRequest(current);
      current = undefined;
      if (isProblem(outcome)) firstProblem ??= outcome;
      else requests.push(outcome);
    }
  };

  try {
    parser.write(xmldata).close();
  } catch (err) {
    // Our own StopParsing, or anything sax throws (it throws on write after
    // an error): either way the document is not acceptable.
    if (fatal === undefined) {
      const message = err instanceof Error ? (err.message.split('\n')[0] ?? '') : '';
      fatal = { errorId: 102, message: `malformed XML: ${message}` };
    }
  }

  if (fatal !== undefined) return fail(fatal.errorId, fatal.message);
  if (!sawRoot) return fail(102, 'malformed XML: no root element');
  if (!sawRequestList) return fail(102, `<${REQUEST_LIST}> missing`);
  if (requestCount === 0) return fail(102, `no <${REQUEST}> elements`);
  if (firstProblem !== undefined) return fail(firstProblem.errorId, firstProblem.message);
  return { ok: true, requests };
}
