// A real OpenID Provider (the certified `oidc-provider` package) for the OAuth tests.
//
// node provider.mjs CONFIG.json: CONFIG names the port, the signing keys (a JWKS with private
// parts, written by the test so it can also mint tokens the provider would never issue), the
// accounts and their claims, and the pre-registered clients. It prints "ready" once listening and
// stops on SIGTERM. Dynamic client registration, PKCE, resource indicators (access tokens are JWTs
// whose audience is the resource; a resource whose URI contains "/opaque" gets opaque tokens, read
// through introspection), the device flow and refresh tokens are enabled; the interactions are the
// package's own development pages (log in as any account, then consent).
import fs from "node:fs";
import Provider from "oidc-provider";

const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const issuer = `http://127.0.0.1:${config.port}`;
const accounts = config.accounts;

function claimsOf(id) {
  const account = accounts[id] || {};
  return { sub: id, email: account.email, email_verified: true, groups: account.groups || [] };
}

const provider = new Provider(issuer, {
  jwks: config.jwks,
  clients: config.clients,
  clientDefaults: { id_token_signed_response_alg: "ES256", grant_types: ["authorization_code", "refresh_token"] },
  scopes: ["openid", "offline_access", "email", "groups", "prompts:read", "prompts:write"],
  claims: { openid: ["sub"], email: ["email", "email_verified"], groups: ["groups"] },
  pkce: { required: () => true },
  // The consent screen's grant: what was asked for (development interactions grant it all).
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => claimsOf(id) }),
  extraTokenClaims: async (ctx, token) => {
    if (!token.accountId) return undefined;
    const claims = claimsOf(token.accountId);
    return { email: claims.email, groups: claims.groups };
  },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    deviceFlow: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: "prompts:read prompts:write",
        audience: resource,
        accessTokenTTL: config.accessTokenTTL || 300,
        accessTokenFormat: resource.includes("/opaque") ? "opaque" : "jwt",
        jwt: { sign: { alg: "ES256" } },
      }),
    },
  },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed("refresh_token"),
  ttl: { AccessToken: 300, DeviceCode: 300, Interaction: 300, Grant: 3600, Session: 3600 },
  cookies: { keys: ["test-cookie-key-for-the-provider"] },
  // Every development interaction asks for a login and a consent, whatever is remembered.
  loadExistingGrant: async (ctx) => {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
  },
});
provider.proxy = false;

const server = provider.listen(config.port, "127.0.0.1", () => {
  process.stdout.write("ready\n");
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
