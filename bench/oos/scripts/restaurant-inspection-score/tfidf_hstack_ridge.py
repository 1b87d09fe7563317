# idiom: TfidfVectorizer on business names + scipy.sparse.hstack with scaled numeric columns, Ridge; intended: valid
import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix, hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, lowercase=True)
text_train = vec.fit_transform(train["business_name"].fillna(""))
text_test = vec.transform(test["business_name"].fillna(""))
print("vocabulary size:", len(vec.vocabulary_))

num_cols = ["Year", "NumberofLocations", "Weekend"]
scaler = StandardScaler()
num_train = scaler.fit_transform(train[num_cols].astype(float))
num_test = scaler.transform(test[num_cols].astype(float))

X = hstack([text_train, csr_matrix(num_train)]).tocsr()
X_test = hstack([text_test, csr_matrix(num_test)]).tocsr()

model = Ridge(alpha=1.0)
model.fit(X, train["inspection_score"])
pred = np.clip(model.predict(X_test), 0, 100)
pd.DataFrame({"id": test["id"], "inspection_score": pred}).to_csv("submission.csv", index=False)
print("median prediction:", np.median(pred))
