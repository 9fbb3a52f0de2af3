/*
 * The identity of a client certificate: its first URI, DNS or email subject alternative name, else
 * its subject common name.
 */
import type { PeerCertificate } from 'node:tls';

/** SAN kinds in the order an identity is taken from them: SPIFFE-style URIs first, CN last. */
const SAN_PREFERENCE = ['URI', 'DNS', 'email'] as const;

/**
 * The identity of a client certificate, as authorization and the recorded owner see it: its
 * first URI subject alternative name (a SPIFFE ID, say), else its first DNS name, else its
 * first email address, else its subject common name.
 */
export function certificateIdentity(certificate: PeerCertificate): string | undefined {
  const sans = parseSubjectAltNames(certificate.subjectaltname ?? '');
  for (const kind of SAN_PREFERENCE) {
    const found = sans.find((san) => san.kind === kind);
    if (found) return found.value;
  }
  const cn = certificate.subject?.CN;
  // A repeated CN field comes as an array; the first one names the subject.
  return (Array.isArray(cn) ? cn[0] : cn) || undefined;
}

/**
 * Node's `subjectaltname`: `DNS:a.example, URI:spiffe://x, IP Address:127.0.0.1`, where a value
 * with a comma, a quote or a non-ASCII character is given as a JSON string.
 */
function parseSubjectAltNames(text: string): Array<{ kind: string; value: string }> {
  const sans: Array<{ kind: string; value: string }> = [];
  const entry = /\s*([^:,]+):("(?:[^"\\]|\\.)*"|[^,]*)(?:,|$)/gy;
  for (let match = entry.exec(text); match && match[0] !== ''; match = entry.exec(text)) {
    const raw = match[2] ?? '';
    sans.push({ kind: match[1] ?? '', value: raw.startsWith('"') ? (JSON.parse(raw) as string) : raw });
  }
  return sans;
}
