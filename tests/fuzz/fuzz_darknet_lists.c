/* Darknet's readers of data files on an in-memory file: get_paths (image
 * lists), get_labels (class names) and read_data_cfg with the lookups the
 * trainers and the adapter make (classes, train, valid, names). What they
 * return is freed by shim_end. */
#include <stddef.h>
#include <stdint.h>

#include "darknet.h"
#include "fuzz_common.h"
#include "shim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *path = (char *)memfile_path();
    memfile_set(NULL, data, size);
    shim_begin(path);
    if (!setjmp(shim_refusal)) {
        list *paths = get_paths(path);
        list_to_array(paths);
        get_labels(path);
        list *options = read_data_cfg(path);
        option_find_int(options, "classes", 2);
        option_find_str(options, "train", "train.list");
        option_find_str(options, "valid", NULL);
        option_find_str(options, "names", "names.list");
    }
    shim_end();
    return 0;
}
