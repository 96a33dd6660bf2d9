/**
 * The keys of everything Plinth stores (DESIGN §16), in one place. A workspace is a project's or
 * a branch's: each has its own id and its own files.
 */

/** Everything of one project's (or branch's) workspace: its files and its backups' file bytes. */
export const projectPrefix = (workspaceId: string) => `projects/${workspaceId}/`;

/** A workspace's uploaded files. */
export const filesPrefix = (workspaceId: string) => `projects/${workspaceId}/files/`;

export const fileKey = (workspaceId: string, fileId: string) => `${filesPrefix(workspaceId)}${fileId}`;

/** The file bytes one backup holds, copied from the workspace's when it was taken. */
export const backupFilesPrefix = (projectId: string, backupId: string) => `projects/${projectId}/backups/${backupId}/`;

export const backupFileKey = (projectId: string, backupId: string, fileId: string) =>
  `${backupFilesPrefix(projectId, backupId)}${fileId}`;

/** Every org's export dumps. */
export const EXPORTS_PREFIX = "exports/";

export const orgExportsPrefix = (orgId: string) => `${EXPORTS_PREFIX}${orgId}/`;

export const exportKey = (orgId: string, filename: string) => `${orgExportsPrefix(orgId)}${filename}`;

/** The last segment of a key: a file's id, a dump's name. */
export const baseName = (key: string) => key.slice(key.lastIndexOf("/") + 1);
