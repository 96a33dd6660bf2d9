import { z } from "@hono/zod-openapi";
import { jsonObject } from "../fields.ts";

export const AccountSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string().nullable(),
    emailVerified: z.boolean(),
    title: z.string().nullable(),
    timezone: z.string().nullable(),
    preferences: z.record(z.string(), z.unknown()).nullable().optional(),
  })
  .openapi("Account");

export const UpdateAccountInput = z
  .object({
    // null clears a field (the account reads it as null).
    name: z.string().max(120).nullable().optional(),
    title: z.string().max(120).nullable().optional(),
    timezone: z.string().max(60).nullable().optional(),
    preferences: jsonObject().optional(),
  })
  .openapi("UpdateAccountInput");
