/* Shared by the harnesses: an in-memory file that Darknet's readers open by
 * name, and the [selsync] section handler that feeds the section to
 * plugin/core/config.c as the Darknet adapter does. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "darknet.h"

/* The in-memory file's name ("/proc/self/fd/N"), created on first use. */
const char *memfile_path(void);

/* Replaces the in-memory file's contents with prefix (may be NULL) followed
 * by the size bytes at data. */
void memfile_set(const char *prefix, const uint8_t *data, size_t size);

/* A cfg_section_handler for "[selsync]": selsync_config_default, then
 * selsync_config_set for each option in order (a line without '=' is
 * refused as the adapter refuses it), selsync_config_finish, then
 * selsync_config_check_world for several world sizes; a second section in
 * one parse is refused. Aborts when an accepted configuration breaks a
 * documented range or a refusal's message is empty or not one line.
 * Returns 0 when the section is accepted, -1 otherwise. */
int fuzz_selsync_section(network *net, const char *cfgfile, int line, const cfg_option *options, int n,
                         void *user);

/* Forgets the section seen in the previous parse (call before each one). */
void fuzz_selsync_reset(void);

#endif
